#include "fl/report/result_files.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace fl::report {

absl::StatusOr<CsvTable> ParseCsv(absl::string_view text, absl::string_view source) {
  CsvTable table;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripSuffix(line, "\r");
    if (line.empty()) continue;
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    if (table.header.empty()) {
      table.header = std::move(cells);
      continue;
    }
    if (cells.size() != table.header.size()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", line_number, ": ", cells.size(),
                                                     " cells, the header has ",
                                                     table.header.size()));
    }
    table.rows.push_back(std::move(cells));
  }
  if (table.header.empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": empty"));
  return table;
}

bool HasColumn(const CsvTable& table, absl::string_view name) {
  return std::find(table.header.begin(), table.header.end(), name) != table.header.end();
}

absl::StatusOr<std::vector<double>> ColumnValues(const CsvTable& table, absl::string_view column,
                                                 absl::string_view source) {
  const size_t index =
      std::find(table.header.begin(), table.header.end(), column) - table.header.begin();
  if (index == table.header.size()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": no column \"", column, "\""));
  }
  std::vector<double> values;
  for (size_t i = 0; i < table.rows.size(); ++i) {
    const std::string& cell = table.rows[i][index];
    double value = std::numeric_limits<double>::quiet_NaN();
    if (!cell.empty() && !absl::SimpleAtod(cell, &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": row ", i + 1, ": ", column, " \"", cell, "\" is not a number"));
    }
    values.push_back(value);
  }
  return values;
}

absl::StatusOr<Series> ColumnSeries(const CsvTable& table, absl::string_view column,
                                    absl::string_view source) {
  absl::StatusOr<std::vector<double>> rounds = ColumnValues(table, "round", source);
  if (!rounds.ok()) return rounds.status();
  absl::StatusOr<std::vector<double>> values = ColumnValues(table, column, source);
  if (!values.ok()) return values.status();
  Series series;
  for (size_t i = 0; i < values->size(); ++i) {
    if (std::isnan((*values)[i])) continue;
    const double round = (*rounds)[i];
    if (!(std::floor(round) == round && std::fabs(round) < 1e9)) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": row ", i + 1, ": round ", round, " is not a whole number"));
    }
    series.push_back({static_cast<int>(round), (*values)[i]});
  }
  return series;
}

std::optional<double> SummaryNumber(absl::string_view json, absl::string_view key) {
  const std::string quoted = absl::StrCat("\"", key, "\"");
  const size_t at = json.find(quoted);
  if (at == absl::string_view::npos) return std::nullopt;
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(json.substr(at + quoted.size()));
  if (!absl::ConsumePrefix(&rest, ":")) return std::nullopt;
  rest = absl::StripLeadingAsciiWhitespace(rest);
  const size_t end = rest.find_first_of(",}\n");
  double value = 0.0;
  if (!absl::SimpleAtod(absl::StripTrailingAsciiWhitespace(rest.substr(0, end)), &value)) {
    return std::nullopt;
  }
  return value;
}

}  // namespace fl::report
