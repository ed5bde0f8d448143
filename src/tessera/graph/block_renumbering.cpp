// SPDX-License-Identifier: BSD-3-Clause
// BlockRenumbering: the (part, old id) numbering of renumber_by_part, held by blocks of old ids.
#include <algorithm>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/graph/partition.hpp"

namespace tessera {

// Part q's new ids go to part q's nodes in old-id order, so the nodes of rank s's block in part q start
// after those of the blocks of ranks before s: rank q (one part per rank) hears every block's count of its
// part, hands out those starts, and every rank numbers its block's nodes of each part from its start on.
BlockRenumbering::BlockRenumbering(const Communicator& comm, const std::string& path, const std::string& name,
                                   int64_t num_nodes, std::vector<int64_t> row_begins)
    : comm_(comm.get(), false, comm.shared_stats()), n_(num_nodes), row_begins_(std::move(row_begins)) {
  const int p = comm.size();
  if (row_begins_.empty()) row_begins_ = block_begins(n_, p);
  require(row_begins_.size() == size_t(p) + 1 && row_begins_.front() == 0 && row_begins_.back() == n_ &&
              std::is_sorted(row_begins_.begin(), row_begins_.end()),
          "BlockRenumbering: row begins are not ", p + 1, " ascending entries from 0 to ", n_);
  first_ = row_begins_[size_t(comm.rank())];
  const std::vector<int32_t> part =
      read_partition(comm, path, name, p, first_, row_begins_[size_t(comm.rank()) + 1] - first_);
  std::vector<int64_t> mine(static_cast<size_t>(p), 0), of_my_part(static_cast<size_t>(p), 0),
      start(static_cast<size_t>(p), 0), my_start(static_cast<size_t>(p), 0);
  for (int32_t q : part) ++mine[size_t(q)];
  all_to_all(comm, mine.data(), 1, of_my_part.data(), "renumber");  // of_my_part[s]: rank s's count
  int64_t size = 0;
  for (int s = 0; s < p; ++s) start[size_t(s)] = size, size += of_my_part[size_t(s)];
  std::vector<int64_t> sizes(static_cast<size_t>(p), 0);
  all_gather(comm, &size, 1, sizes.data(), "renumber");
  begin_.assign(size_t(p + 1), 0);
  for (int q = 0; q < p; ++q) begin_[size_t(q + 1)] = begin_[size_t(q)] + sizes[size_t(q)];
  for (int64_t& s : start) s += begin_[size_t(comm.rank())];
  all_to_all(comm, start.data(), 1, my_start.data(), "renumber");  // my_start[q]: my first id in part q
  new_of_block_.resize(part.size());
  for (size_t i = 0; i < part.size(); ++i) new_of_block_[i] = my_start[size_t(part[i])]++;
}

int64_t BlockRenumbering::of_block_node(int64_t old) const {
  require(old >= first_ && old - first_ < int64_t(new_of_block_.size()), "BlockRenumbering: node ", old,
          " is not in rank ", comm_.rank(), "'s block");
  return new_of_block_[size_t(old - first_)];
}

int BlockRenumbering::holder(int64_t old) const {
  return int(std::upper_bound(row_begins_.begin(), row_begins_.end(), old) - row_begins_.begin()) - 1;
}

std::vector<int64_t> BlockRenumbering::lookup(const std::vector<int64_t>& old) const {
  const int p = comm_.size();
  std::vector<std::vector<int64_t>> ask(static_cast<size_t>(p));
  for (int64_t v : old) {
    require(v >= 0 && v < n_, "BlockRenumbering: node ", v, " outside [0, ", n_, ")");
    ask[size_t(holder(v))].push_back(v);
  }
  std::vector<int64_t> offset(static_cast<size_t>(p) + 1, 0);  // where each rank's answers start in `got`
  for (int r = 0; r < p; ++r) offset[size_t(r) + 1] = offset[size_t(r)] + int64_t(ask[size_t(r)].size());
  std::vector<int64_t> asked_counts;
  std::vector<int64_t> answer = exchange_buckets(comm_, ask, "renumber", &asked_counts);
  for (int64_t& v : answer) v = of_block_node(v);  // in place: answers go back in the order asked
  std::vector<std::vector<int64_t>> back(static_cast<size_t>(p));
  size_t k = 0;
  for (int r = 0; r < p; ++r)
    for (int64_t j = 0; j < asked_counts[size_t(r)]; ++j) back[size_t(r)].push_back(answer[k++]);
  const std::vector<int64_t> got = exchange_buckets(comm_, std::move(back), "renumber");
  std::vector<int64_t> out(old.size());
  for (size_t i = 0; i < old.size(); ++i) out[i] = got[size_t(offset[size_t(holder(old[i]))]++)];
  return out;
}

}  // namespace tessera
