// doctest's main, which also fails a run in which no test case passed the
// filters. ctest runs each case by its name (--test-case=NAME), and a name
// the filter cannot match (CMake cuts a name at ';') would otherwise "pass"
// having run nothing: 49 cases did so unseen before this check.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

namespace {

unsigned cases_run = 0;

// Records how many test cases passed the filters; reports nothing.
struct count_cases : doctest::IReporter {
    explicit count_cases(const doctest::ContextOptions&) {}
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_run_end(const doctest::TestRunStats& s) override { cases_run = s.numTestCasesPassingFilters; }
    void test_case_start(const doctest::TestCaseData&) override {}
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats&) override {}
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("count_cases", 1, count_cases);

}  // namespace

int main(int argc, char** argv) {
    doctest::Context context(argc, argv);
    const int rc = context.run();
    if (context.shouldExit()) return rc;  // --help, --list-test-cases and the like
    if (rc == 0 && cases_run == 0) {
        std::fprintf(stderr, "dlgraph tests: no test case passed the filters, so nothing ran (a test case's name "
                             "must not contain ';', which ctest cannot pass on)\n");
        return 1;
    }
    return rc;
}
