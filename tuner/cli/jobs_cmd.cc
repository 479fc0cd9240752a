// `hccl-tune jobs [--job ID] [--json] [--daemon T]`: the node's running jobs and their ranks, from hccl-tuned's job
// view (tuner/cli/job_view.h, docs/TROUBLESHOOTING.md "Running jobs"). Exit status 0, 1 when the daemon cannot
// answer or knows no job ID (the error names it).
#include <google/protobuf/util/json_util.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "tuner/cli/commands.h"
#include "tuner/cli/job_view.h"
#include "tuner/cli/store_access.h"

namespace hccltune::cli {
namespace {

struct JobsArgs {
  std::string daemon, job;
  bool json = false;
};

int RunJobs(const JobsArgs& a) {
  auto target = JobViewTarget(a.daemon);
  if (!target.ok()) return ReportError(target.status());
  auto jobs = GetJobs(*target, a.job);
  if (!jobs.ok()) return ReportError(jobs.status());
  if (a.json) {
    std::string text;
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    options.preserve_proto_field_names = true;
    options.always_print_primitive_fields = true;
    (void)google::protobuf::util::MessageToJsonString(*jobs, &text, options);
    std::cout << text;
  } else {
    std::cout << FormatJobs(*jobs, *target);
  }
  return 0;
}

}  // namespace

void RegisterJobs(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<JobsArgs>();
  auto* cmd = app.add_subcommand("jobs", "The node's running jobs and ranks (hccl-tuned's job view)");
  cmd->add_option("--daemon", a->daemon, "hccl-tuned target: unix:/path or host:port (default: discovery)");
  cmd->add_option("--job", a->job, "Only this job (its id, or the part after KIND:)");
  cmd->add_flag("--json", a->json, "Print JSON (the GetJobs reply, proto field names)");
  cmd->callback([a, exit_code] { *exit_code = RunJobs(*a); });
}

}  // namespace hccltune::cli
