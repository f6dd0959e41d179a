#ifndef TOOLS_SWEEP_HTML_REPORT_H_
#define TOOLS_SWEEP_HTML_REPORT_H_

// report.html of a sweep: one page that opens anywhere, without a network or
// JavaScript (docs/report-pages.md), with what table.md and curves.png show:
// the title and notes, the results and paired-differences tables, the runs that
// are stale, failed or missing, the curves (per variant the mean over its seeds
// with the min-max band) and the diagnostics as inline SVG, and a link to each
// run's own report.html.

#include <string>
#include <vector>

#include "tools/sweep/report.h"
#include "tools/sweep/sweep.pb.h"

namespace sweep {

// As TableMarkdown: `spec` with its defaults filled, `runs` in table order.
std::string SweepReportHtml(const fedkit::sweep::SweepSpec& spec, const TableContext& context,
                            const std::vector<RunRecord>& runs);

}  // namespace sweep

#endif  // TOOLS_SWEEP_HTML_REPORT_H_
