#include "fl/report/html.h"

#include "absl/strings/str_cat.h"

namespace fl::report {
namespace {

// One style sheet for both pages. System fonts only: a web font would be a
// download. Charts keep their own size but shrink with a narrow window.
constexpr char kStyle[] = R"css(
body { font: 15px/1.45 system-ui, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #222;
       max-width: 1140px; margin: 0 auto; padding: 12px 24px 48px; }
h1 { font-size: 24px; margin: 12px 0 2px; }
h2 { font-size: 19px; margin: 28px 0 10px; padding-top: 10px; border-top: 1px solid #ddd; }
h3 { font-size: 16px; margin: 18px 0 6px; }
.sub { color: #555; margin: 0 0 8px; }
nav a { margin-right: 14px; white-space: nowrap; }
a { color: #1a5fb4; }
code, pre { font: 13px/1.4 "DejaVu Sans Mono", Menlo, Consolas, monospace; }
pre { background: #f6f6f6; border: 1px solid #e4e4e4; padding: 10px 12px; overflow: auto; }
.numbers { display: flex; flex-wrap: wrap; gap: 10px; margin: 4px 0 10px; }
.number { border: 1px solid #ddd; border-radius: 6px; padding: 6px 14px; min-width: 120px; }
.number .label { font-size: 12px; color: #555; }
.number .value { font-size: 19px; font-weight: 600; font-variant-numeric: tabular-nums; }
.charts { display: flex; flex-wrap: wrap; gap: 14px 20px; align-items: flex-start; }
figure { margin: 0; }
svg { max-width: 100%; height: auto; }
table { border-collapse: collapse; font-size: 14px; margin: 6px 0 12px; }
th, td { border-bottom: 1px solid #e2e2e2; padding: 4px 12px; text-align: left;
         vertical-align: top; }
th { border-bottom: 2px solid #bbb; }
.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.note { color: #555; font-size: 14px; }
details { margin: 8px 0; }
summary { cursor: pointer; color: #1a5fb4; }
)css";

std::string Cell(absl::string_view tag, absl::string_view text, bool number) {
  return absl::StrCat("<", tag, number ? " class=\"num\"" : "", ">", HtmlEscape(text), "</", tag,
                      ">");
}

}  // namespace

std::string HtmlEscape(absl::string_view text) {
  std::string escaped;
  escaped.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      case '\'':
        escaped += "&#39;";
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

std::string HtmlPage(absl::string_view title, absl::string_view body) {
  // The empty data: icon keeps the browser from asking for /favicon.ico.
  return absl::StrCat("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
                      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
                      "<link rel=\"icon\" href=\"data:,\">\n<title>", HtmlEscape(title),
                      "</title>\n<style>", kStyle, "</style>\n</head>\n<body>\n", body,
                      "</body>\n</html>\n");
}

std::string Section(absl::string_view id, absl::string_view heading, absl::string_view content) {
  return absl::StrCat("<section id=\"", HtmlEscape(id), "\">\n<h2>", HtmlEscape(heading), "</h2>\n",
                      content, "</section>\n");
}

std::string Paragraph(absl::string_view text) {
  return absl::StrCat("<p>", HtmlEscape(text), "</p>\n");
}

std::string Preformatted(absl::string_view text) {
  return absl::StrCat("<pre>", HtmlEscape(text), "</pre>\n");
}

std::string Table(const std::vector<std::string>& header,
                  const std::vector<std::vector<std::string>>& rows, size_t text_columns) {
  std::string html = "<table>\n<thead><tr>";
  for (size_t i = 0; i < header.size(); ++i) {
    absl::StrAppend(&html, Cell("th", header[i], i >= text_columns));
  }
  absl::StrAppend(&html, "</tr></thead>\n<tbody>\n");
  for (const std::vector<std::string>& row : rows) {
    absl::StrAppend(&html, "<tr>");
    for (size_t i = 0; i < row.size(); ++i) {
      absl::StrAppend(&html, Cell("td", row[i], i >= text_columns));
    }
    absl::StrAppend(&html, "</tr>\n");
  }
  return absl::StrCat(html, "</tbody>\n</table>\n");
}

std::string KeyNumbers(const std::vector<std::pair<std::string, std::string>>& numbers) {
  std::string html = "<div class=\"numbers\">\n";
  for (const auto& [label, value] : numbers) {
    absl::StrAppend(&html, "<div class=\"number\"><div class=\"label\">", HtmlEscape(label),
                    "</div><div class=\"value\">", HtmlEscape(value), "</div></div>\n");
  }
  return absl::StrCat(html, "</div>\n");
}

std::string Contents(const std::vector<std::pair<std::string, std::string>>& sections) {
  std::string html = "<nav>";
  for (const auto& [id, heading] : sections) {
    absl::StrAppend(&html, "<a href=\"#", HtmlEscape(id), "\">", HtmlEscape(heading), "</a>");
  }
  return absl::StrCat(html, "</nav>\n");
}

}  // namespace fl::report
