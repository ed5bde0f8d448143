// SPDX-License-Identifier: BSD-3-Clause
// The link task of a training run (private to models/): its loss, its width and what the options may ask
// of it, and its node ids for a partition's renumbering. train.cpp's, apart so that it reads as the node
// task's driver.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/models/nn/link_loss.hpp"
#include "tessera/models/train_options.hpp"

namespace tessera {

struct GraphMeta;

/// Collective: a link task's pairs (read whole on every rank, checked) and its loss, before the load.
std::unique_ptr<LinkLoss> link_loss_of(const TrainOptions& o, const GraphFileReader& reader,
                                       const Communicator& world);
/// `link-decoder` mlp: a decoder over `model`'s output, attached to the model (its parameters trained and
/// saved with the model's) and given to the loss; nothing for the dot product.
void attach_link_decoder(const TrainOptions& o, Sequential& model, LinkLoss& loss);
/// Every node id of a link task (its pairs and negatives), for the partition's renumbering.
std::vector<std::vector<int64_t>*> link_task_ids(LinkTask& task);
/// A link task's node embeddings: `embedding-dim`, or the hidden width.
int64_t embedding_width(const TrainOptions& o);
/// Throws Error where the options ask what a link task on `meta` cannot give.
void check_link_task(const TrainOptions& o, const GraphMeta& meta);

}  // namespace tessera
