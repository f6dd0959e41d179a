#ifndef AGGREGATORS_AGGREGATION_BENCHMARK_H_
#define AGGREGATORS_AGGREGATION_BENCHMARK_H_

namespace aggregators {

// The aggregation benchmark (aggregation_benchmark.cc) over every aggregator
// registered when it is called; argv as its command line. Returns the exit code.
int AggregationBenchmarkMain(int argc, char** argv);

}  // namespace aggregators

#endif  // AGGREGATORS_AGGREGATION_BENCHMARK_H_
