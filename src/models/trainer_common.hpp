// SPDX-License-Identifier: BSD-3-Clause
// Pieces the one-rank and the 3D trainers share (not installed).
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessera/models/trainer.hpp"

namespace tessera {

/// The console line and the --metrics JSON line of one epoch (`extra` is merged into the JSON).
void report_epoch(const EpochRecord& r, const TrainOptions& options, std::ofstream& metrics,
                  const nlohmann::json& extra);
/// Collective: CollectiveError on impossible settings.
void check_train_options(const TrainOptions& options, const Communicator& world);
/// Atomic text file of one prediction per line.
void write_predictions_file(const std::string& path, const std::vector<int64_t>& predictions);
/// The 3D trainer (trainer3d.cpp).
TrainResult train_3d(const TrainOptions& options, const Communicator& world);

}  // namespace tessera
