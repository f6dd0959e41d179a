#ifndef FL_REPORT_HTML_H_
#define FL_REPORT_HTML_H_

// The pieces the report pages (a run's, a sweep's) are made of: escaped text,
// the page around a body with its style sheet, sections, tables and key numbers.
// Everything is inline, so that a page opens from a results folder anywhere,
// without a network and without JavaScript.

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace fl::report {

// `text` with &, <, >, " and ' as entities: safe as element content and inside
// a quoted attribute.
std::string HtmlEscape(absl::string_view text);

// A whole page: `title` (escaped) in <title>, `body` as it is. Nothing is loaded
// from elsewhere, not even a favicon.
std::string HtmlPage(absl::string_view title, absl::string_view body);

// <section id="ID"><h2>HEADING</h2>CONTENT</section>: `heading` escaped,
// `content` as it is.
std::string Section(absl::string_view id, absl::string_view heading, absl::string_view content);

// A <p> of `text`, escaped.
std::string Paragraph(absl::string_view text);

// A <pre> of `text`, escaped.
std::string Preformatted(absl::string_view text);

// A table of text cells, all escaped. The first `text_columns` columns are text
// (left-aligned), the others numbers (right-aligned).
std::string Table(const std::vector<std::string>& header,
                  const std::vector<std::vector<std::string>>& rows, size_t text_columns = 1);

// Labelled numbers in a row of tiles: (label, value), both escaped.
std::string KeyNumbers(const std::vector<std::pair<std::string, std::string>>& numbers);

// Links to the page's sections: (id, heading), the heading escaped.
std::string Contents(const std::vector<std::pair<std::string, std::string>>& sections);

}  // namespace fl::report

#endif  // FL_REPORT_HTML_H_
