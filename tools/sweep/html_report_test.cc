#include "tools/sweep/html_report.h"

#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/sweep/metrics.h"
#include "tools/sweep/report.h"

namespace sweep {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A baseline and a variant over seeds 1 and 2, three rounds each, with a
// diagnostic; the variant's seed 2 failed.
class HtmlReportTest : public ::testing::Test {
 protected:
  HtmlReportTest() {
    auto* base = spec_.add_variants();
    base->set_name("base");
    base->set_label("Base <1>");
    auto* variant = spec_.add_variants();
    variant->set_name("new");
    variant->set_label("New & improved");
    spec_.set_baseline("base");
    spec_.set_title("A <sweep>");
    spec_.add_notes("Read \"this\" first.");
    spec_.set_curve_column("test_accuracy");
    spec_.add_diagnostics("eta_g");
    Metric* metric = spec_.add_metrics();
    metric->set_kind(Metric::FINAL);
    FillDefaults(*metric);
    runs_ = {Finished("base", 1, {0.70, 0.80, 0.86}), Finished("base", 2, {0.72, 0.78, 0.82}),
             Finished("new", 1, {0.75, 0.85, 0.88})};
    RunRecord& failed = runs_.emplace_back();
    failed.variant = "new";
    failed.seed = 2;
    failed.status = RunStatus::kFailed;
    failed.log = "new_seed2.log";
    context_.command = "bazel run //tools/sweep -- --sweep=x.sweep.textproto";
    context_.base_spec = "base.textproto";
    context_.seeds = {1, 2};
  }

  static RunRecord Finished(const std::string& variant, uint64_t seed,
                            const std::vector<double>& accuracy) {
    RunRecord run;
    run.variant = variant;
    run.seed = seed;
    run.status = RunStatus::kFinished;
    run.log = absl::StrCat(variant, "_seed", seed, ".log");
    run.report = absl::StrCat(variant, "_seed", seed, "/report.html");
    for (size_t i = 0; i < accuracy.size(); ++i) {
      const int round = static_cast<int>(i) + 1;
      run.data.curve.push_back({round, accuracy[i]});
      // A virtual clock: 10 s a round, plus the seed.
      run.data.curve_x.push_back({round, 10.0 * round + seed});
      run.data.diagnostics["eta_g"].push_back({round, 1.0 + accuracy[i]});
    }
    run.data.metrics = {{true, accuracy.back()}};
    run.data.wall_seconds = 10;
    run.data.peak_rss_mb = 300;
    return run;
  }

  std::string Html() { return SweepReportHtml(spec_, context_, runs_); }

  // The section with id `id`, from its tag to its end.
  std::string SectionOf(const std::string& id) {
    const std::string html = Html();
    const size_t begin = html.find("<section id=\"" + id + "\">");
    if (begin == std::string::npos) return "";
    return html.substr(begin, html.find("</section>", begin) - begin);
  }

  static int Count(const std::string& text, const std::string& pattern) {
    const std::regex re(pattern);
    return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), re),
                                          std::sregex_iterator()));
  }

  fedkit::sweep::SweepSpec spec_;
  TableContext context_;
  std::vector<RunRecord> runs_;
};

TEST_F(HtmlReportTest, TitleNotesAndCommandEscaped) {
  const std::string html = Html();
  EXPECT_THAT(html, HasSubstr("<h1>A &lt;sweep&gt;</h1>"));
  EXPECT_THAT(html, HasSubstr("<p>Read &quot;this&quot; first.</p>"));
  EXPECT_THAT(html, HasSubstr("<code>bazel run //tools/sweep -- --sweep=x.sweep.textproto</code>"));
  EXPECT_THAT(html, HasSubstr("3 of 4 runs finished, 1 failed."));
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("<sweep>")));
}

TEST_F(HtmlReportTest, TheTablesHoldTheCellsOfTableMd) {
  const SweepTables tables = ComputeTables(spec_, context_, runs_);
  const std::string markdown = TableMarkdown(spec_, context_, runs_);
  const std::string results = SectionOf("results");
  // Base: final 0.86 and 0.82; New: 0.88 (n=1); New - Base on seed 1: +2.00.
  EXPECT_THAT(results, HasSubstr("<td>Base &lt;1&gt; (baseline)</td><td class=\"num\">84.00 ± "
                                 "2.83</td>"));
  EXPECT_THAT(results, HasSubstr("<td>New &amp; improved</td><td class=\"num\">88.00 (n=1)</td>"));
  for (const auto& row : tables.results.rows) {
    for (size_t i = 1; i < row.size(); ++i) {
      EXPECT_THAT(markdown, HasSubstr(row[i]));
      EXPECT_THAT(results, HasSubstr(absl::StrCat(">", row[i], "<")));
    }
  }
  EXPECT_THAT(SectionOf("differences"), HasSubstr("<h2>Paired differences to Base &lt;1&gt;</h2>"));
  EXPECT_THAT(SectionOf("differences"),
              HasSubstr("<td>New &amp; improved</td><td class=\"num\">1</td><td "
                        "class=\"num\">+2.00</td>"));
}

TEST_F(HtmlReportTest, NoDifferencesWhenEveryVariantIsItsOwnReference) {
  spec_.mutable_variants(1)->set_baseline("new");
  EXPECT_EQ(SectionOf("differences"), "");
  EXPECT_THAT(Html(), Not(HasSubstr("href=\"#differences\"")));
}

TEST_F(HtmlReportTest, OneCurvePerVariantWithABandWhereSeveralSeedsFinished) {
  const std::string curves = SectionOf("curves");
  EXPECT_EQ(Count(curves, "<path class=\"series\""), 2);
  EXPECT_THAT(curves, HasSubstr("data-series=\"Base &lt;1&gt; (2 seeds)\" data-points=\"3\""));
  EXPECT_THAT(curves, HasSubstr("data-series=\"New &amp; improved (1 seed)\" data-points=\"3\""));
  // Only the baseline has two seeds to span.
  EXPECT_EQ(Count(curves, "<path class=\"band\""), 1);
  EXPECT_THAT(curves, HasSubstr(">test_accuracy (%)</text>"));
}

TEST_F(HtmlReportTest, CurvesAgainstTheRoundByDefault) {
  const std::string curves = SectionOf("curves");
  EXPECT_THAT(curves, HasSubstr(">round</text>"));
  EXPECT_THAT(curves,
              HasSubstr(">test_accuracy: mean over the seeds, band from min to max</text>"));
  EXPECT_THAT(curves, Not(HasSubstr("Each point is an evaluated round")));
}

TEST_F(HtmlReportTest, CurvesAgainstVirtualTime) {
  spec_.set_curve_x_column("virtual_seconds");
  const std::string curves = SectionOf("curves");
  EXPECT_THAT(curves, HasSubstr(">virtual seconds</text>"));
  EXPECT_THAT(curves, Not(HasSubstr(">round</text>")));
  EXPECT_THAT(curves, HasSubstr(">test_accuracy against virtual seconds: mean over the seeds, "
                                "band from min to max</text>"));
  EXPECT_THAT(curves, HasSubstr("<p>Each point is an evaluated round: the mean over the seeds of "
                                "virtual_seconds and of test_accuracy there;"));
  EXPECT_THAT(curves, HasSubstr("data-series=\"Base &lt;1&gt; (2 seeds)\" data-points=\"3\""));
  // Base's seeds 1 and 2 are at 11 and 12 s in round 1, 31 and 32 s in round 3,
  // New's seed 1 at 11 and 31 s: the x axis spans seconds, not rounds 1 to 3.
  EXPECT_THAT(curves, HasSubstr(">12.5</text>"));
  EXPECT_THAT(curves, HasSubstr(">30.0</text>"));
  // The diagnostics stay per round.
  EXPECT_THAT(SectionOf("diagnostics"), HasSubstr(">round</text>"));

  // Runs from before the clock have no virtual_seconds, so no curve against it.
  for (RunRecord& run : runs_) run.data.curve_x.clear();
  EXPECT_THAT(SectionOf("curves"), HasSubstr("<p>No finished run has a curve against "
                                             "virtual_seconds: see the unreadable results under "
                                             "Runs.</p>"));
}

TEST_F(HtmlReportTest, OneChartPerDiagnostic) {
  const std::string diagnostics = SectionOf("diagnostics");
  EXPECT_EQ(Count(diagnostics, "<svg class=\"chart\""), 1);
  EXPECT_EQ(Count(diagnostics, "<path class=\"series\"[^>]*data-points=\"3\""), 2);
  EXPECT_THAT(diagnostics, HasSubstr(">eta_g: mean over the seeds</text>"));
  // The curves' legend names the variants; each line still does on hover.
  EXPECT_THAT(diagnostics, Not(HasSubstr(">Base &lt;1&gt; (2 seeds)</text>")));
  EXPECT_THAT(diagnostics, HasSubstr("<title>Base &lt;1&gt; (2 seeds)</title>"));
  spec_.clear_diagnostics();
  EXPECT_EQ(SectionOf("diagnostics"), "");
}

TEST_F(HtmlReportTest, LinksToEachRunsPageAndListsTheFailedOnes) {
  const std::string section = SectionOf("runs");
  EXPECT_THAT(section, HasSubstr("<tr><td>Base &lt;1&gt;</td><td><a href=\"base_seed1/"
                                 "report.html\">report</a></td><td><a href=\"base_seed2/"
                                 "report.html\">report</a></td></tr>"));
  EXPECT_THAT(section, HasSubstr("<td><a href=\"new_seed1/report.html\">report</a></td>"
                                 "<td>failed</td>"));
  EXPECT_THAT(section, HasSubstr("<li><code>new</code> seed 2: failed, see <a "
                                 "href=\"new_seed2.log\">new_seed2.log</a></li>"));
  runs_[0].stale = "spec.textproto differs";
  EXPECT_THAT(SectionOf("runs"), HasSubstr("report.html\">report</a> †</td>"));
  EXPECT_THAT(SectionOf("runs"), HasSubstr("<h3>Stale runs</h3>"));
}

}  // namespace
}  // namespace sweep
