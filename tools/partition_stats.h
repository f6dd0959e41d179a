#ifndef TOOLS_PARTITION_STATS_H_
#define TOOLS_PARTITION_STATS_H_

// What a partition looks like: per-client class counts, as a CSV and as text.
//
//   auto counts = tools::CountByClass(shares, labels, 10);
//   std::string csv = tools::CountsCsv(counts);      // client,0,1,...,9
//   std::string text = tools::SummaryText(counts);   // min/median/max + a table

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace tools {

// counts[k][c]: examples of class c held by client k.
// REQUIRES: every index in shares is < labels.size(), every label in [0, num_classes).
std::vector<std::vector<int64_t>> CountByClass(const std::vector<std::vector<int64_t>>& shares,
                                               absl::Span<const int64_t> labels,
                                               int64_t num_classes);

// Header `client,0,1,...,K-1`, then one row per client: its id and its counts.
std::string CountsCsv(const std::vector<std::vector<int64_t>>& counts);

// Client sizes and classes held (min / median / max, mean size), then a table with
// one row per client: id, size, classes held and, when there are at most
// `max_class_columns` classes, the count of each.
std::string SummaryText(const std::vector<std::vector<int64_t>>& counts,
                        int max_class_columns = 20);

}  // namespace tools

#endif  // TOOLS_PARTITION_STATS_H_
