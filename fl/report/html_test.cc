#include "fl/report/html.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(HtmlTest, EscapesTheFiveSpecialCharacters) {
  EXPECT_EQ(HtmlEscape("a<b>&\"c\"'d'"), "a&lt;b&gt;&amp;&quot;c&quot;&#39;d&#39;");
  EXPECT_EQ(HtmlEscape("plain ± text"), "plain ± text");
}

TEST(HtmlTest, APageLoadsNothingFromElsewhere) {
  const std::string page = HtmlPage("<run>", "<p>body</p>");
  EXPECT_THAT(page, HasSubstr("<title>&lt;run&gt;</title>"));
  EXPECT_THAT(page, HasSubstr("<p>body</p>"));
  EXPECT_THAT(page, Not(HasSubstr("http")));
  EXPECT_THAT(page, Not(HasSubstr("<script")));
  EXPECT_THAT(page, Not(HasSubstr("@import")));
}

TEST(HtmlTest, TablesAlignNumbersRight) {
  const std::string table = Table({"variant", "final"}, {{"A & B", "86.1"}});
  EXPECT_THAT(table, HasSubstr("<th>variant</th><th class=\"num\">final</th>"));
  EXPECT_THAT(table, HasSubstr("<td>A &amp; B</td><td class=\"num\">86.1</td>"));
  EXPECT_THAT(Table({"a", "b"}, {{"x", "y"}}, 2), HasSubstr("<td>x</td><td>y</td>"));
}

TEST(HtmlTest, SectionsNumbersAndContents) {
  EXPECT_EQ(Section("spec", "Spec <1>", "<pre>x</pre>"),
            "<section id=\"spec\">\n<h2>Spec &lt;1&gt;</h2>\n<pre>x</pre></section>\n");
  EXPECT_THAT(KeyNumbers({{"peak RSS", "<394 MB"}}),
              HasSubstr("<div class=\"label\">peak RSS</div>"
                        "<div class=\"value\">&lt;394 MB</div>"));
  EXPECT_EQ(Contents({{"spec", "Spec"}}), "<nav><a href=\"#spec\">Spec</a></nav>\n");
  EXPECT_EQ(Paragraph("a<b"), "<p>a&lt;b</p>\n");
  EXPECT_EQ(Preformatted("name: \"x\""), "<pre>name: &quot;x&quot;</pre>\n");
}

}  // namespace
}  // namespace fl::report
