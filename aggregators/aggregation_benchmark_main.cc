#include "aggregators/aggregation_benchmark.h"

int main(int argc, char** argv) { return aggregators::AggregationBenchmarkMain(argc, argv); }
