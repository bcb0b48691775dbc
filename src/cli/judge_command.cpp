// `d2k judge design|code|calibrate`: an LLM judge scores a design document or a solution's code against a
// task's guidance items (src/judge, docs/judge.md). Exit status: 0 when the judgement finished (calibrate:
// and every bar held), 1 when a budget stopped it (calibrate: or a bar failed), 2 for bad usage or an error.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "agent/resume_check.hpp"
#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "core/error.hpp"
#include "core/file_bytes.hpp"
#include "core/task_loader.hpp"
#include "core/text.hpp"
#include "core/timestamp.hpp"
#include "judge/calibration.hpp"
#include "judge/judge.hpp"
#include "judge/report.hpp"
#include "llm/model_config.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;
using namespace d2k::judge;

struct JudgeOptions {
  std::string subject;  // a run folder, a file or a folder
  std::string task;
  std::string model;
  std::string models_file;
  int samples = 3;
  std::optional<uint64_t> seed;
  std::string out;
  bool fresh = false;
  std::optional<double> max_cost_usd;
  std::optional<int64_t> max_tokens_total;
  // calibrate
  std::vector<std::string> tasks;
  bool plan = false;
  bool write_results = false;
};

std::string safe_name(std::string text) {
  for (char& c : text)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.' && c != '+') c = '_';
  return text;
}

// The judge model: its client (a line on stderr before each retry's wait), prices and recorded entry.
struct JudgeModel {
  std::unique_ptr<llm::ChatClient> client;
  llm::Prices prices;
  nlohmann::json entry;
};

JudgeModel judge_model(const JudgeOptions& o) {
  if (o.model.empty() || o.models_file.empty()) fail("d2k judge: --model and --models are required (the judge model)");
  const auto models = llm::load_models(o.models_file);
  const auto it = models.find(o.model);
  if (it == models.end()) {
    std::string known;
    for (const auto& [name, config] : models) known += (known.empty() ? "" : ", ") + name;
    fail("--model: {} has no model '{}' (it has: {})", o.models_file, o.model, known);
  }
  llm::ClientOptions options;
  options.on_retry = [](const llm::RetryNotice& n) {
    std::cerr << fmt::format("d2k judge: the judge's endpoint: attempt {} of {} failed ({}); retrying in {:.1f} s\n", n.attempt,
                             n.max_attempts, printable(n.why, 300), n.wait_seconds);
  };
  return {llm::make_client(it->second, options), it->second.prices, agent::model_entry(it->second)};
}

// The task of a run folder's run.json, checked against --task; --task alone otherwise.
std::string task_of(const JudgeOptions& o) {
  const fs::path subject = o.subject;
  if (is_run_folder(subject)) {
    const auto text = file_bytes(subject / "run.json");
    const auto settings = nlohmann::json::parse(text.value_or(""), nullptr, false);
    if (!settings.is_object() || !settings.contains("task") || !settings["task"].is_string())
      fail("{}: run.json has no \"task\" string", (subject / "run.json").string());
    const auto task = settings["task"].get<std::string>();
    if (!o.task.empty() && o.task != task)
      fail("--task {}: the run folder {} is a run of {} (run.json)", o.task, subject.string(), task);
    return task;
  }
  if (o.task.empty()) fail("d2k judge: --task is required when the subject is not an agent run folder ({})", o.subject);
  return o.task;
}

JudgeSetup base_setup(const JudgeOptions& o, const Context& context, const Task& task, Subject subject, JudgeModel& model) {
  JudgeSetup setup;
  setup.task = &task;
  setup.subject = std::move(subject);
  if (setup.subject.kind == Kind::code) setup.rules = load_integrity_rules(context.root / "docs" / "integrity.md");
  setup.client = model.client.get();
  setup.cost_usd = [prices = model.prices](const llm::Usage& usage) { return llm::cost_usd(usage, prices); };
  setup.model = o.model;
  setup.model_entry = model.entry;
  setup.samples = o.samples;
  setup.seed = o.seed;
  setup.max_cost_usd = o.max_cost_usd;
  setup.max_tokens_total = o.max_tokens_total;
  setup.log = &std::cerr;
  return setup;
}

void discard(const fs::path& out) {
  fs::remove(out);
  fs::remove(samples_file(out));
}

int run_subject(const JudgeOptions& o, const GlobalOptions& global, Kind kind) {
  if (o.samples < 1) fail("--samples {}: must be at least 1", o.samples);
  const auto context = make_context(global.root);
  const auto task_name = task_of(o);
  const Task task = load_task(context.tasks_dir, task_name);
  auto subject = kind == Kind::design ? load_design(o.subject) : load_code(o.subject);
  auto model = judge_model(o);
  fs::path out = o.out;
  if (out.empty()) {
    out = is_run_folder(o.subject)
              ? fs::absolute(o.subject) / "judge" / fmt::format("{}-{}.json", name_of(kind), safe_name(o.model))
              : context.cache_dir / "judge" /
                    fmt::format("{}-{}-{}-{}.json", safe_name(task_name), name_of(kind), subject.sha256.substr(0, 12), safe_name(o.model));
  }
  if (o.fresh) discard(out);
  auto setup = base_setup(o, context, task, std::move(subject), model);
  setup.out = out;
  std::cerr << fmt::format("d2k judge: {} of {} by {}, {} samples; score file {}\n", name_of(kind), task.name, o.model, o.samples,
                           out.string());
  const auto judgement = run_judge(setup);
  print_judgement(std::cout, task, kind, judgement, o.model, out.string());
  return judgement.complete ? 0 : 1;
}

int run_calibrate(const JudgeOptions& o, const GlobalOptions& global) {
  if (o.samples < 1) fail("--samples {}: must be at least 1", o.samples);
  const auto context = make_context(global.root);
  const auto cases = calibration_cases(context.root, o.tasks);
  if (o.plan) {
    for (const auto& c : cases)
      std::cout << nlohmann::json{{"task", c.task},
                                  {"case", c.name},
                                  {"kind", name_of(c.kind)},
                                  {"subject", c.subject.string()},
                                  {"subject_task", c.subject_task},
                                  {"bar", c.high ? fmt::format(">= {}", kHighBar) : fmt::format("<= {}", kLowBar)}}
                       .dump()
                << '\n';
    return 0;
  }
  auto model = judge_model(o);
  const fs::path out_dir = o.out.empty() ? context.cache_dir / "judge" / fmt::format("calibration-{}", safe_name(o.model)) : fs::path(o.out);
  if (o.fresh) fs::remove_all(out_dir);
  std::map<std::string, Task> tasks;
  struct Row {
    const CalibrationCase* c;
    double score;
    bool complete;
    bool pass;
    std::string kappa;
  };
  std::vector<Row> rows;
  bool all = true;
  for (const auto& c : cases) {
    if (!tasks.count(c.task)) tasks.emplace(c.task, load_task(context.tasks_dir, c.task));
    auto subject = c.kind == Kind::design ? load_design(c.subject) : load_code(c.subject);
    auto setup = base_setup(o, context, tasks.at(c.task), std::move(subject), model);
    setup.out = out_dir / safe_name(c.task) / (c.name + ".json");
    std::cerr << fmt::format("d2k judge calibrate: {} {} ({})\n", c.task, c.name, c.subject.string());
    const auto j = run_judge(setup);
    const bool pass = j.complete && !j.samples.empty() && meets_bar(c, j.score.score);
    all = all && pass;
    rows.push_back({&c, j.score.score, j.complete, pass, j.agreement.kappa ? fmt::format("{:.2f}", *j.agreement.kappa) : "-"});
  }
  std::string table = "| task | case | kind | subject | bar | score | kappa | result |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const auto& r : rows) {
    const auto& c = *r.c;
    const auto subject = c.subject_task.empty() ? std::string("examples/minimal") : c.subject_task;
    table += fmt::format("| {} | {} | {} | {} | {} | {:.1f} | {} | {} |\n", c.task, c.name, name_of(c.kind), subject,
                         c.high ? fmt::format(">= {:.0f}", kHighBar) : fmt::format("<= {:.0f}", kLowBar), r.score, r.kappa,
                         !r.complete ? "incomplete" : r.pass ? "pass" : "FAIL");
  }
  std::cout << fmt::format("judge calibration by {} ({} samples a case)\n\n", o.model, o.samples) << table;
  std::cout << fmt::format("\n{}: {} of {} cases within their bars; score files in {}\n", all ? "calibrated" : "NOT calibrated",
                           std::count_if(rows.begin(), rows.end(), [](const Row& r) { return r.pass; }), rows.size(), out_dir.string());
  if (o.write_results) {
    const auto file = context.root / "docs" / "results" / fmt::format("{}-judge-calibration-{}.md", utc_timestamp().substr(0, 10), safe_name(o.model));
    std::ofstream md(file);
    md << fmt::format("# Judge calibration: {}\n\n`d2k judge calibrate --model {} --samples {}`, {}. Judge entry: `{}`.\n\n", o.model,
                      o.model, o.samples, utc_timestamp(), model.entry.dump());
    md << table;
    md << fmt::format("\n{} of {} cases within their bars (docs/judge.md, Calibration).\n",
                      std::count_if(rows.begin(), rows.end(), [](const Row& r) { return r.pass; }), rows.size());
    if (!md) fail("{}: cannot write the results", file.string());
    std::cout << "results: " << file.string() << '\n';
  }
  return all ? 0 : 1;
}

void add_common(CLI::App& command, JudgeOptions& o) {
  command.add_option("--model,-m", o.model, "the judge model, a model of the models file");
  command.add_option("--models", o.models_file, "the models file (TOML; see docs/agent.md)");
  command.add_option("--samples", o.samples, "judge samples, the items in a new order each")->capture_default_str();
  command.add_option_function<uint64_t>("--seed", [&o](uint64_t s) { o.seed = s; }, "seed of the item orders (default: random, recorded)");
  command.add_flag("--fresh", o.fresh, "discard stored samples of this judgement and start again");
  command.add_option_function<double>("--max-cost-usd", [&o](double usd) { o.max_cost_usd = usd; },
                                      "stop asking once this many US dollars are spent (stored replies count)");
  command.add_option_function<int64_t>("--max-tokens-total", [&o](int64_t n) { o.max_tokens_total = n; },
                                       "stop asking once this many input + output tokens are used");
}

}  // namespace

Command add_judge_command(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<JudgeOptions>();
  auto* command = app.add_subcommand("judge", "score a design or a solution's code against a task's guidance with an LLM judge");
  command->require_subcommand(1);
  auto* design = command->add_subcommand("design", "score a design document (a run folder's submitted/design.md, or a file)");
  design->add_option("subject", options->subject, "an agent run folder, a design file, or a folder holding design.md")->required();
  design->add_option("--task,-t", options->task, "the task whose guidance is the rubric (default: the run's)");
  design->add_option("--out", options->out, "the score file (default: <run>/judge/design-<model>.json, or the cache)");
  add_common(*design, *options);
  auto* code = command->add_subcommand("code", "score a solution's code (a run folder's submitted solution, or a folder)");
  code->add_option("subject", options->subject, "an agent run folder, a solution folder, or one source file")->required();
  code->add_option("--task,-t", options->task, "the task whose guidance is the rubric (default: the run's)");
  code->add_option("--out", options->out, "the score file (default: <run>/judge/code-<model>.json, or the cache)");
  add_common(*code, *options);
  auto* calibrate = command->add_subcommand("calibrate", "score subjects of known quality and check each against its bar");
  calibrate->add_option("--task,-t", options->tasks, "only these calibration tasks (default: every one)");
  calibrate->add_option("--out", options->out, "folder of the score files (default: <cache>/judge/calibration-<model>)");
  calibrate->add_flag("--plan", options->plan, "print the cases as JSON lines and ask nothing");
  calibrate->add_flag("--write-results", options->write_results, "write the table to docs/results/<date>-judge-calibration-<model>.md");
  add_common(*calibrate, *options);
  return {command, [options, &global, design, code, calibrate]() -> int {
            if (design->parsed()) return run_subject(*options, global, Kind::design);
            if (code->parsed()) return run_subject(*options, global, Kind::code);
            if (calibrate->parsed()) return run_calibrate(*options, global);
            return 2;
          }};
}

}  // namespace d2k
