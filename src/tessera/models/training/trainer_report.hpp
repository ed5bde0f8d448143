// SPDX-License-Identifier: BSD-3-Clause
// Not installed: what the Trainer adds to each epoch's record (communication, per-phase times) and the
// last step's logits for keep_last_step.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/models/training/batch_source.hpp"

namespace tessera {

/// Collective: the bytes this rank sent per collective kind since `before` ("bytes_<kind>"), its seconds in
/// communication ("comm_s"), and the largest byte total over ranks ("bytes_max_rank").
nlohmann::json comm_report(const Communicator& world, const CommStats& before);

/// Collective: per phase of the 3D schedule (SpMM, GEMM, loss and every collective) the max and mean seconds
/// over ranks since the `before` values and their ratio; adds a console line to `lines`.
nlohmann::json phase_report(const Communicator& world, const PhaseTimers* now, const PhaseTimers& before,
                            double loss_seconds, const CommStats& comm_before,
                            std::vector<std::string>& lines);

/// Collective over the model's 3D replica: its logits block summed into nodes x classes in node order.
std::vector<float> gather_logits(Model& model, const Matrix<const float>& logits, const Batch& batch,
                                 int64_t num_nodes);

}  // namespace tessera
