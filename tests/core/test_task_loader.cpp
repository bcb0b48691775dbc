// The task loader and the task model: the fixture tests/core/data/tasks/demo/rms_add loads with every
// field in place; each rule of docs/task-format.md is broken once by editing a copy of the fixture, and
// the error must name the file, line, field path and value.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>
#include <unistd.h>

#include "core/error.hpp"
#include "core/task_loader.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;

const fs::path kTasks = fs::path(D2K_TEST_DATA) / "core" / "data" / "tasks";

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// A private copy of the fixture under a fresh tasks root, removed afterwards.
class FixtureCopy {
 public:
  FixtureCopy() {
    static int counter = 0;
    root_ = fs::temp_directory_path() / fmt::format("d2k-test-core-{}-{}", ::getpid(), counter++);
    fs::remove_all(root_);
    fs::create_directories(dir());
    fs::copy(kTasks / "demo" / "rms_add", dir(), fs::copy_options::recursive);
  }
  ~FixtureCopy() { fs::remove_all(root_); }
  const fs::path& root() const { return root_; }
  fs::path dir() const { return root_ / "demo" / "rms_add"; }

 private:
  fs::path root_;
};

const Workload& workload(const Task& task, const std::string& name) {
  const Workload* found = task.find_workload(name);
  if (found == nullptr) throw std::runtime_error("no workload " + name);
  return *found;
}

TEST(TaskLoader, LoadsEveryFieldOfTheFixture) {
  Task task = load_task(kTasks / "demo" / "rms_add", kTasks);
  EXPECT_EQ(task.name, "demo/rms_add");
  EXPECT_EQ(task.dir, kTasks / "demo" / "rms_add");
  EXPECT_EQ(task.summary, "Residual add then RMSNorm in place, with per-group scales");
  EXPECT_EQ(task.source, "a test fixture modeled on vLLM fused_add_rms_norm");
  EXPECT_EQ(task.baseline, "residual += x; x = residual * rsqrt(mean(residual^2) + eps) * w");
  EXPECT_EQ(task.flops_dtype, DType::bf16);  // the defaults of the optional keys
  EXPECT_FALSE(task.deterministic);
  EXPECT_EQ(task.description, "The fixture every loader test starts from.\n");
  EXPECT_EQ(task.library, "a fused test path");
  EXPECT_EQ(task.axes, (std::vector<std::string>{"T", "H", "G"}));
  EXPECT_EQ(task.flops, "4 * T * H");

  ASSERT_EQ(task.inputs.size(), 4u);
  const TensorSpec& x = task.inputs[0];
  EXPECT_EQ(x.name, "x");
  EXPECT_EQ(x.dtype, DType::bf16);
  EXPECT_EQ(x.shape, (std::vector<std::string>{"T", "H"}));
  EXPECT_TRUE(x.strides.empty());
  EXPECT_EQ(x.init.dist, "normal");
  EXPECT_EQ(x.init.std, 0.5);
  EXPECT_EQ(x.init.mean, 0.0);
  EXPECT_FALSE(x.prepare);
  EXPECT_TRUE(x.perturb);  // the default of a floating input prepare cannot see
  EXPECT_TRUE(task.inputs[2].prepare);
  EXPECT_FALSE(task.inputs[2].perturb);  // the default of an input prepare sees
  EXPECT_TRUE(task.inputs[3].perturb);   // given, for an integer input
  EXPECT_EQ(task.inputs[1].init.dist, "student_t");
  EXPECT_EQ(task.inputs[1].init.df, 4.0);
  EXPECT_EQ(task.inputs[2].init.low, 0.5);
  EXPECT_EQ(task.inputs[2].init.high, 1.5);
  EXPECT_EQ(task.inputs[3].dtype, DType::i32);
  EXPECT_EQ(task.inputs[3].strides, (std::vector<std::string>{"2"}));
  EXPECT_EQ(task.inputs[3].init.dist, "randint");
  EXPECT_EQ(task.inputs[3].init.high, 128.0);

  ASSERT_EQ(task.outputs.size(), 3u);
  EXPECT_TRUE(task.outputs[0].inplace);
  EXPECT_EQ(task.outputs[0].tolerance.metric, Tolerance::Metric::numeric);
  EXPECT_EQ(task.outputs[0].tolerance.nmse, 1e-5);
  EXPECT_EQ(task.outputs[0].tolerance.rtol, 0.016);
  EXPECT_EQ(task.outputs[0].tolerance.atol, 0.002);
  EXPECT_EQ(task.outputs[0].tolerance.atol_scale, Tolerance::AtolScale::output);  // the default
  const TensorSpec& scales = task.outputs[1];
  EXPECT_FALSE(scales.inplace);
  EXPECT_EQ(scales.shape, (std::vector<std::string>{"T", "ceil_div(H, G)"}));
  ASSERT_EQ(scales.layouts.size(), 1u);
  EXPECT_EQ(scales.layouts.at("col"), (std::vector<std::string>{"1", "align(T, 4)"}));
  EXPECT_EQ(task.outputs[2].dtype, DType::i64);
  EXPECT_EQ(task.outputs[2].tolerance.metric, Tolerance::Metric::exact);

  ASSERT_EQ(task.compare.size(), 1u);
  EXPECT_EQ(task.compare.at("x_dequant").rtol, 0.13);
  ASSERT_NE(task.tolerance_for("x_dequant"), nullptr);
  EXPECT_EQ(task.tolerance_for("x_dequant")->nmse, 1e-4);
  EXPECT_EQ(task.tolerance_for("scales"), &scales.tolerance);
  EXPECT_EQ(task.tolerance_for("residual"), nullptr);

  ASSERT_EQ(task.scalars.size(), 2u);
  EXPECT_EQ(task.scalars[0].name, "eps");
  EXPECT_FALSE(task.scalars[0].is_int);
  EXPECT_EQ(task.scalars[0].value, 1e-6);
  EXPECT_TRUE(task.scalars[1].is_int);
  EXPECT_EQ(task.scalars[1].value, 128.0);

  ASSERT_EQ(task.workloads.size(), 2u);
  const Workload& llama = task.workloads[0];
  EXPECT_EQ(llama.name, "llama3-8b-T2048");
  EXPECT_EQ(llama.model, "Llama-3-8B");
  EXPECT_EQ(llama.axes, (std::map<std::string, int64_t>{{"T", 2048}, {"H", 4096}, {"G", 128}}));
  EXPECT_EQ(llama.scalars, (std::map<std::string, double>{{"eps", 1e-5}}));
  EXPECT_EQ(llama.layouts, (std::map<std::string, std::string>{{"scales", "col"}}));
  ASSERT_EQ(llama.inits.size(), 2u);
  EXPECT_EQ(task.workloads[1].name, "qwen2.5-7b-T7");
  EXPECT_FALSE(llama.smoke);
  EXPECT_TRUE(task.workloads[1].smoke);
  EXPECT_TRUE(task.workloads[1].scalars.empty());

  EXPECT_EQ(task.guidance.items.size(), 6u);
  EXPECT_EQ(task.guidance.items[5].id, "L3.2");
}

TEST(TaskLoader, FlopsDtypeAndDeterministicAreRead) {
  FixtureCopy copy;
  const fs::path file = copy.dir() / "task.toml";
  std::string text = read_text(file);
  text.replace(text.find("flops = "), 0, "flops_dtype = \"f8e4m3\"\ndeterministic = true\n");
  write_text(file, text);
  const Task task = load_task(copy.dir(), copy.root());
  EXPECT_EQ(task.flops_dtype, DType::f8e4m3);
  EXPECT_TRUE(task.deterministic);
}

TEST(TaskLoader, WorkloadInitsOverrideOnTopOfTheInputsInit) {
  Task task = load_task(kTasks / "demo" / "rms_add", kTasks);
  const Workload& llama = workload(task, "llama3-8b-T2048");
  const Workload& qwen = workload(task, "qwen2.5-7b-T7");
  InputInit residual = init_of(*task.find_input("residual"), llama);
  EXPECT_EQ(residual.dist, "student_t");  // kept
  EXPECT_EQ(residual.df, 4.0);            // kept
  EXPECT_EQ(residual.std, 2.0);           // overridden
  InputInit x = init_of(*task.find_input("x"), llama);
  EXPECT_EQ(x.dist, "ties");
  EXPECT_EQ(x.quantum, 0.125);
  EXPECT_EQ(x.std, 0.5);  // from the input's own init
  EXPECT_EQ(init_of(*task.find_input("residual"), qwen).std, 1.0);
  EXPECT_EQ(init_of(*task.find_input("weight"), llama).dist, "uniform");
}

TEST(TaskLoader, GeometryFlopsBytesAndScalarsPerWorkload) {
  Task task = load_task(kTasks / "demo" / "rms_add", kTasks);
  const Workload& llama = workload(task, "llama3-8b-T2048");
  const Workload& qwen = workload(task, "qwen2.5-7b-T7");

  Geometry x = geometry_of(*task.find_input("x"), llama);
  EXPECT_EQ(x.shape, (std::vector<int64_t>{2048, 4096}));
  EXPECT_EQ(x.strides, (std::vector<int64_t>{4096, 1}));
  EXPECT_EQ(x.numel(), 2048 * 4096);
  EXPECT_EQ(x.span(), 2048 * 4096);

  // llama picks the column-major layout; qwen keeps row-major.
  Geometry col = geometry_of(*task.find_output("scales"), llama);
  EXPECT_EQ(col.shape, (std::vector<int64_t>{2048, 32}));
  EXPECT_EQ(col.strides, (std::vector<int64_t>{1, 2048}));
  EXPECT_EQ(col.span(), 2048 * 32);
  Geometry row = geometry_of(*task.find_output("scales"), qwen);
  EXPECT_EQ(row.shape, (std::vector<int64_t>{7, 28}));
  EXPECT_EQ(row.strides, (std::vector<int64_t>{28, 1}));
  EXPECT_EQ(row.span(), 196);
  // align(7, 4) = 8 pads each column: 1 + 6 * 1 + 27 * 8 elements.
  Workload padded = qwen;
  padded.layouts["scales"] = "col";
  Geometry padded_col = geometry_of(*task.find_output("scales"), padded);
  EXPECT_EQ(padded_col.strides, (std::vector<int64_t>{1, 8}));
  EXPECT_EQ(padded_col.numel(), 196);
  EXPECT_EQ(padded_col.span(), 223);

  Geometry ids = geometry_of(*task.find_input("ids"), llama);
  EXPECT_EQ(ids.strides, (std::vector<int64_t>{2}));
  EXPECT_EQ(ids.span(), 2 * 2047 + 1);

  EXPECT_EQ(flops_of(task, llama), 4.0 * 2048 * 4096);
  EXPECT_EQ(min_bytes_of(task, llama), 8.0 * 2048 * 4096 + 2 * 4096 + 4.0 * 2048 * 32);
  EXPECT_EQ(min_bytes_of(task, qwen), 8.0 * 7 * 3584 + 2 * 3584 + 4.0 * 7 * 28);

  auto scalars = scalars_of(task, llama);
  ASSERT_EQ(scalars.size(), 2u);
  EXPECT_EQ(scalars[0].first->name, "eps");
  EXPECT_EQ(scalars[0].second, 1e-5);
  EXPECT_EQ(scalars[1].first->name, "group");
  EXPECT_EQ(scalars[1].second, 128.0);
  EXPECT_EQ(scalars_of(task, qwen)[0].second, 1e-6);

  Workload bad = qwen;
  bad.layouts["scales"] = "diagonal";
  EXPECT_THROW(geometry_of(*task.find_output("scales"), bad), Error);
}

// Random shapes and strides: the span is one past the largest reachable offset, found by brute force.
TEST(TaskModel, SpanAndNumelMatchBruteForceOnRandomGeometries) {
  std::mt19937 rng(99);
  for (int round = 0; round < 300; ++round) {
    int rank = std::uniform_int_distribution<int>(0, 4)(rng);
    TensorSpec spec;
    spec.name = "t";
    Workload w;
    w.name = "random";
    bool custom = rng() % 2 == 0;
    for (int d = 0; d < rank; ++d) {
      std::string axis = "a" + std::to_string(d);
      w.axes[axis] = std::uniform_int_distribution<int64_t>(1, 6)(rng);
      spec.shape.push_back(rng() % 2 ? axis : "2 * " + axis + " - 1");
      if (custom) spec.strides.push_back(fmt::format("align({}, 4) + {}", axis, rng() % 5));
    }
    if (rng() % 5 == 0 && rank > 0) w.axes["a0"] = 1;
    Geometry g = geometry_of(spec, w);
    ASSERT_EQ(g.shape.size(), static_cast<std::size_t>(rank));
    int64_t numel = 1;
    for (int64_t extent : g.shape) numel *= extent;
    EXPECT_EQ(g.numel(), numel);
    if (!custom) {
      int64_t expected = 1;
      for (int d = rank - 1; d >= 0; --d) {
        EXPECT_EQ(g.strides[d], expected);
        expected *= g.shape[d];
      }
    }
    int64_t max_offset = -1;
    std::vector<int64_t> index(rank, 0);
    for (int64_t flat = 0; flat < numel; ++flat) {
      int64_t offset = 0;
      for (int d = 0; d < rank; ++d) offset += index[d] * g.strides[d];
      max_offset = std::max(max_offset, offset);
      for (int d = rank - 1; d >= 0; --d) {
        if (++index[d] < g.shape[d]) break;
        index[d] = 0;
      }
    }
    EXPECT_EQ(g.span(), max_offset + 1);
  }
}

TEST(TaskModel, GeometryRejectsFractionalAndNegativeExtents) {
  TensorSpec spec;
  spec.name = "w";
  spec.shape = {"H / 3"};
  Workload w;
  w.name = "odd";
  w.axes = {{"H", 10}};
  try {
    geometry_of(spec, w);
    FAIL() << "fractional shape accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("tensor 'w' shape[0]: formula 'H / 3' gives 3.33333"), std::string::npos)
        << error.what();
  }
  w.axes["H"] = 9;
  EXPECT_EQ(geometry_of(spec, w).shape, std::vector<int64_t>{3});
  spec.shape = {"3 - H"};
  EXPECT_THROW(geometry_of(spec, w), Error);
  spec.shape = {"H"};
  spec.strides = {"1", "1"};
  EXPECT_THROW(geometry_of(spec, w), Error);  // more strides than dimensions
}

TEST(TaskLoader, LoadsEveryTaskSortedByName) {
  std::vector<Task> tasks = load_tasks(kTasks);
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_EQ(tasks[0].name, "basic/copy");
  EXPECT_EQ(tasks[1].name, "demo/batched_matmul");
  EXPECT_EQ(tasks[2].name, "demo/rms_add");
  EXPECT_TRUE(tasks[0].library.empty());  // the defaults of the optional keys
  EXPECT_TRUE(tasks[0].inputs[0].perturb);
  EXPECT_FALSE(tasks[0].inputs[0].prepare);
  EXPECT_FALSE(tasks[0].workloads[0].smoke);
  EXPECT_EQ(tasks[0].flops, "0");  // an integer formula
  EXPECT_EQ(tasks[0].inputs[0].init.dist, "normal");  // the default init
  EXPECT_TRUE(tasks[0].scalars.empty());
  EXPECT_TRUE(tasks[0].compare.empty());
  EXPECT_THROW(load_tasks(kTasks / "missing"), Error);
}

std::string load_error(const fs::path& dir, const fs::path& root) {
  try {
    load_task(dir, root);
  } catch (const Error& error) {
    return error.what();
  }
  return "no error";
}

TEST(TaskLoader, PerturbDefaultsToTheFloatingInputsPrepareCannotSee) {
  FixtureCopy copy;
  fs::path file = copy.dir() / "task.toml";
  std::string text = read_text(file);
  for (const std::string line : {"perturb = true\n", "prepare = true\n"}) text.erase(text.find(line), line.size());
  write_text(file, text);
  Task task = load_task(copy.dir(), copy.root());
  EXPECT_TRUE(task.inputs[2].perturb) << "a bf16 weight that prepare does not see";
  EXPECT_FALSE(task.inputs[3].perturb) << "an integer input, unless the task says so";
}

TEST(TaskLoader, RelabelImpliesPerturbAndItsBlockMayNameAnIntegerScalar) {
  FixtureCopy copy;
  fs::path file = copy.dir() / "task.toml";
  std::string text = read_text(file);
  const std::string init = "init = { dist = \"normal\", std = 0.5 }\n";
  text.replace(text.find(init), init.size(), init + "relabel = \"group / 2\"\n");
  write_text(file, text);
  Task task = load_task(copy.dir(), copy.root());
  EXPECT_TRUE(task.inputs[0].perturb);
  EXPECT_EQ(task.inputs[0].relabel, "group / 2");
  EXPECT_EQ(relabel_block_of(task, task.inputs[0], task.workloads[0]), 64);  // the scalar group is 128
  EXPECT_EQ(relabel_block_of(task, task.inputs[1], task.workloads[0]), 0);
}

TEST(TaskLoader, TheNameIsTheFolderAndMustBeATaskName) {
  FixtureCopy copy;
  fs::rename(copy.dir(), copy.root() / "demo" / "Rms-Add");
  const std::string message = load_error(copy.root() / "demo" / "Rms-Add", copy.root());
  EXPECT_NE(message.find("the folder 'demo/Rms-Add' under the tasks root"), std::string::npos) << message;
  EXPECT_NE(message.find("is not a task name"), std::string::npos) << message;
}

TEST(TaskLoader, GuidanceErrorsAndMissingFilesNameTheFile) {
  FixtureCopy copy;
  fs::path guidance = copy.dir() / "guidance.md";
  std::string text = read_text(guidance);
  write_text(guidance, text.substr(0, text.find("## L3.2")));
  std::string message = load_error(copy.dir(), copy.root());
  EXPECT_NE(message.find(guidance.string() + ": level 3 (execution) has 1 item"), std::string::npos) << message;

  fs::remove(guidance);
  message = load_error(copy.dir(), copy.root());
  EXPECT_NE(message.find(guidance.string() + ": cannot read"), std::string::npos) << message;

  message = load_error(copy.root() / "demo" / "nothing", copy.root());
  EXPECT_NE(message.find("nothing/task.toml: no such file"), std::string::npos) << message;
}

TEST(TaskLoader, LoadTasksReportsABrokenTask) {
  FixtureCopy copy;
  fs::path file = copy.dir() / "task.toml";
  std::string text = read_text(file);
  write_text(file, text.replace(text.find("T = 7,"), 6, "T = -7,"));
  try {
    load_tasks(copy.root());
    FAIL() << "broken task loaded";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("workloads[1].axes.T = -7"), std::string::npos) << error.what();
  }
}

// One broken rule: edits to the fixture's task.toml (each `from` must occur exactly once) and fragments
// the message must hold. "@" in a fragment stands for the line where the first edit's text starts.
struct Broken {
  const char* rule;
  std::vector<std::pair<std::string, std::string>> edits;
  std::vector<std::string> fragments;
};

void PrintTo(const Broken& broken, std::ostream* os) { *os << broken.rule; }

class BrokenTask : public testing::TestWithParam<Broken> {};

TEST_P(BrokenTask, FailsNamingFileFieldAndValue) {
  const Broken& broken = GetParam();
  FixtureCopy copy;
  fs::path file = copy.dir() / "task.toml";
  std::string text = read_text(file);
  int line = 0;
  for (const auto& [from, to] : broken.edits) {
    std::size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    ASSERT_EQ(text.find(from, at + 1), std::string::npos) << "ambiguous edit: " << from;
    text.replace(at, from.size(), to);
    if (line == 0) {
      std::size_t leading = to.find_first_not_of('\n');
      line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + at, '\n')) +
             static_cast<int>(leading == std::string::npos ? 0 : leading);
    }
  }
  write_text(file, text);

  std::string message = load_error(copy.dir(), copy.root());
  EXPECT_EQ(message.rfind(file.string(), 0), 0u) << message;
  for (std::string fragment : broken.fragments) {
    if (auto at = fragment.find('@'); at != std::string::npos) fragment.replace(at, 1, std::to_string(line));
    EXPECT_NE(message.find(fragment), std::string::npos) << "missing '" << fragment << "' in: " << message;
  }
}

const std::string kOutputX = "dtype = \"bf16\"\nshape = [\"T\", \"H\"]\ninplace";
const std::string kQwenAxes = "axes = { T = 7, H = 3584, G = 128 }";

INSTANTIATE_TEST_SUITE_P(
    Rules, BrokenTask,
    testing::Values(
        // The file as a whole.
        Broken{"toml_syntax", {{"model = \"Qwen2.5-7B\"", "model = \"Qwen2.5-7B"}}, {"task.toml:@:", "invalid TOML"}},
        Broken{"name_still_written", {{"summary = \"Residual add", "name = \"demo/rms_add\"\nsummary = \"Residual add"}},
               {"task.toml:@: name: a task's name comes from its folder ('demo/rms_add'); delete this line"}},
        Broken{"unknown_top_level_key", {{"flops = \"4 * T * H\"", "flopz = \"T\"\nflops = \"4 * T * H\""}},
               {"task.toml:@: flopz: unknown key (known keys: summary, source, baseline, library, description"}},
        Broken{"library_not_a_string", {{"library = \"a fused test path\"", "library = true"}},
               {"task.toml:@: library = true: must be a string"}},
        Broken{"library_empty", {{"library = \"a fused test path\"", "library = \"\""}},
               {"task.toml:@: library = \"\": must not be empty"}},
        Broken{"flops_dtype_not_a_measured_rate", {{"flops = \"4 * T * H\"", "flops_dtype = \"f16\"\nflops = \"4 * T * H\""}},
               {"task.toml:@: flops_dtype = \"f16\": 'f16' is not a measured matrix rate (bf16, f8e4m3, i8)"}},
        Broken{"deterministic_not_a_bool", {{"flops = \"4 * T * H\"", "deterministic = \"yes\"\nflops = \"4 * T * H\""}},
               {"task.toml:@: deterministic = \"yes\": must be true or false"}},
        Broken{"missing_summary", {{"summary = \"Residual add then RMSNorm in place, with per-group scales\"\n", ""}},
               {"missing required key 'summary'"}},
        Broken{"empty_source", {{"source = \"a test fixture modeled on vLLM fused_add_rms_norm\"", "source = \"\""}},
               {"task.toml:@: source = \"\": must not be empty"}},
        // Axes and formulas.
        Broken{"axes_not_an_array", {{"axes = [\"T\", \"H\", \"G\"]", "axes = \"T\""}},
               {"task.toml:@: axes = \"T\": must be an array"}},
        Broken{"duplicate_axis", {{"axes = [\"T\", \"H\", \"G\"]", "axes = [\"T\", \"H\", \"T\"]"}},
               {"task.toml:@: axes[2] = \"T\": is declared twice"}},
        Broken{"axis_not_an_identifier", {{"axes = [\"T\", \"H\", \"G\"]", "axes = [\"T\", \"H\", \"2G\"]"}},
               {"task.toml:@: axes[2] = \"2G\": must be an identifier"}},
        Broken{"undeclared_axis_in_flops", {{"flops = \"4 * T * H\"", "flops = \"4 * T * K\""}},
               {"task.toml:@: flops = \"4 * T * K\": uses axis 'K', which is not declared in axes (T, H, G)"}},
        Broken{"formula_syntax", {{"min_bytes = \"2 * 2 * T * H * 2 + 2 * H + 4 * T * ceil_div(H, G)\"", "min_bytes = \"2 * (T + H\""}},
               {"task.toml:@: min_bytes = \"2 * (T + H\": formula '2 * (T + H' at position 10: expected ')' before the end"}},
        Broken{"undeclared_axis_in_shape", {{"shape = [\"T\", \"ceil_div(H, G)\"]", "shape = [\"T\", \"ceil_div(H, B)\"]"}},
               {"task.toml:@: outputs[1].shape[1] = \"ceil_div(H, B)\": uses axis 'B'"}},
        Broken{"undeclared_axis_in_layout", {{"layouts.col = [\"1\", \"align(T, 4)\"]", "layouts.col = [\"1\", \"align(N, 4)\"]"}},
               {"task.toml:@: outputs[1].layouts.col[1] = \"align(N, 4)\": uses axis 'N'"}},
        // Inputs.
        Broken{"unknown_input_key", {{"init = { dist = \"normal\", std = 0.5 }", "shpe = [\"T\"]\ninit = { dist = \"normal\", std = 0.5 }"}},
               {"task.toml:@: inputs[0].shpe: unknown key (known keys: name, dtype, shape, strides, layouts, init, prepare, perturb, relabel)"}},
        Broken{"prepare_not_a_bool", {{"prepare = true", "prepare = \"weights\""}},
               {"task.toml:@: inputs[2].prepare = \"weights\": must be true or false"}},
        Broken{"perturb_not_a_bool", {{"perturb = true", "perturb = 1"}},
               {"task.toml:@: inputs[3].perturb = 1: must be true or false"}},
        Broken{"perturb_what_prepare_sees", {{"prepare = true", "prepare = true\nperturb = true"}},
               {"task.toml:", "inputs[2].perturb = true: contradicts prepare = true"}},
        Broken{"perturb_rank_zero", {{"shape = [\"T\"]\nstrides = [\"2\"]", "shape = []"}},
               {"task.toml:", "inputs[3].perturb = true: a rank-0 input has no row to swap elements within"}},
        Broken{"relabel_not_a_string", {{"init = { dist = \"normal\", std = 0.5 }", "init = { dist = \"normal\", std = 0.5 }\nrelabel = 8"}},
               {"inputs[0].relabel = 8: must be a formula (a string) in the axes"}},
        Broken{"relabel_with_perturb_false", {{"perturb = true", "perturb = false\nrelabel = \"2\""}},
               {"inputs[3].perturb = false: perturb = false contradicts relabel"}},
        Broken{"relabel_what_prepare_sees", {{"prepare = true", "prepare = true\nrelabel = \"G\""}},
               {"inputs[2].relabel = \"G\": contradicts prepare = true"}},
        Broken{"relabel_not_dividing_the_last_dimension", {{"init = { dist = \"normal\", std = 0.5 }", "init = { dist = \"normal\", std = 0.5 }\nrelabel = \"5\""}},
               {"tensor 'x' relabel = '5' gives 5 on workload", "a block must be at least 2 and divide the last dimension"}},
        Broken{"unknown_dtype", {{"name = \"weight\"\ndtype = \"bf16\"", "name = \"weight\"\ndtype = \"bfloat16\""}},
               {"inputs[2].dtype = \"bfloat16\": unknown dtype (known: f32 f16 bf16 f8e4m3 f64 i32 i64 i8 u8)"}},
        Broken{"duplicate_input", {{"name = \"weight\"", "name = \"residual\""}},
               {"task.toml:@: inputs[2].name = \"residual\": another input has this name"}},
        Broken{"rank_above_eight", {{"shape = [\"H\"]", "shape = [\"H\", 1, 1, 1, 1, 1, 1, 1, 1]"}},
               {"task.toml:@: inputs[2].shape = ", "has rank 9, more than 8"}},
        Broken{"strides_rank", {{"strides = [\"2\"]", "strides = [\"2\", \"1\"]"}},
               {"task.toml:@: inputs[3].strides = ", "has 2 strides for 1 dimensions"}},
        Broken{"unknown_init_key", {{"init = { dist = \"normal\", std = 0.5 }", "init = { dist = \"normal\", sdt = 0.5 }"}},
               {"task.toml:@: inputs[0].init.sdt: unknown key"}},
        Broken{"unknown_dist", {{"dist = \"uniform\"", "dist = \"gaussian\""}},
               {"task.toml:@: inputs[2].init.dist = \"gaussian\": unknown distribution"}},
        Broken{"key_not_for_the_dist", {{"low = 0.5, high = 1.5 }", "low = 0.5, high = 1.5, std = 1.0 }"}},
               {"task.toml:@: inputs[2].init.std = 1.0: does not apply to dist 'uniform' (it uses: low, high)"}},
        Broken{"uniform_low_not_below_high", {{"low = 0.5, high = 1.5 }", "low = 2.5, high = 1.5 }"}},
               {"inputs[2].init: low (2.5) must be less than high (1.5)"}},
        Broken{"randint_fraction", {{"high = 128 }", "high = 128.5 }"}},
               {"inputs[3].init: randint needs integer low and high, got 0 and 128.5"}},
        Broken{"non_positive_std", {{"std = 0.5 }", "std = -0.5 }"}},
               {"task.toml:@: inputs[0].init.std = -0.5: must be positive"}},
        Broken{"non_positive_df", {{"df = 4.0 }", "df = 0 }"}},
               {"task.toml:@: inputs[1].init.df = 0: must be positive"}},
        // Outputs and tolerances.
        Broken{"missing_tolerance", {{"tolerance = { metric = \"exact\" }\n", ""}},
               {"outputs[2]: missing required key 'tolerance'"}},
        Broken{"unknown_metric", {{"metric = \"exact\"", "metric = \"bitwise\""}},
               {"task.toml:@: outputs[2].tolerance.metric = \"bitwise\": unknown metric (known: numeric, exact, segments, sample)"}},
        Broken{"exact_with_rtol", {{"metric = \"exact\" }", "metric = \"exact\", rtol = 0.1 }"}},
               {"task.toml:@: outputs[2].tolerance.rtol = 0.1: does not apply to metric 'exact'"}},
        Broken{"unknown_atol_scale", {{"rtol = 1e-6, atol = 0.0 }", "rtol = 1e-6, atol = 0.0, atol_scale = \"column\" }"}},
               {"task.toml:@: outputs[1].tolerance.atol_scale = \"column\": unknown scale (known: output, row)"}},
        Broken{"atol_scale_on_exact", {{"metric = \"exact\" }", "metric = \"exact\", atol_scale = \"row\" }"}},
               {"task.toml:@: outputs[2].tolerance.atol_scale = \"row\": does not apply to metric 'exact'"}},
        // The segments metric (moe/align_block_size): its keys, its formulas, its outputs.
        Broken{"segments_key_on_exact", {{"metric = \"exact\" }", "metric = \"exact\", pad = \"T\" }"}},
               {"task.toml:@: outputs[2].tolerance.pad = \"T\": applies to metric 'segments' only"}},
        Broken{"segments_without_pad", {{"metric = \"exact\" }", "metric = \"segments\", labels = \"x\", block = \"G\" }"}},
               {"task.toml:@: outputs[2].tolerance: missing required key 'pad'"}},
        Broken{"segments_pad_unknown_axis", {{"metric = \"exact\" }", "metric = \"segments\", labels = \"x\", block = \"G\", pad = \"T * K\" }"}},
               {"task.toml:@: outputs[2].tolerance.pad = \"T * K\": uses axis 'K'"}},
        Broken{"segments_labels_not_an_integer_output", {{"metric = \"exact\" }", "metric = \"segments\", labels = \"scales\", block = \"G\", pad = \"T\" }"}},
               {"task.toml:", "outputs[2].tolerance.labels: 'scales' is not another 1-D integer output"}},
        Broken{"segments_key_on_numeric", {{"rtol = 1e-6, atol = 0.0 }", "rtol = 1e-6, atol = 0.0, labels = \"argmax\" }"}},
               {"task.toml:@: outputs[1].tolerance.labels = \"argmax\": applies to metric 'segments' only"}},
        Broken{"segments_output_of_rank_two",
               {{"tolerance = { metric = \"numeric\", nmse = 1e-10, rtol = 1e-6, atol = 0.0 }",
                 "tolerance = { metric = \"segments\", labels = \"argmax\", block = \"G\", pad = \"T\" }"}},
               {"task.toml:", "outputs[1].tolerance: metric 'segments' needs a 1-D integer output; 'scales' is f32 of rank 2"}},
        // The sample metric (sample/top_k_top_p): its keys, the seed scalar, an integer output.
        Broken{"sample_key_on_exact", {{"metric = \"exact\" }", "metric = \"exact\", seed = \"group\" }"}},
               {"task.toml:@: outputs[2].tolerance.seed = \"group\": applies to metric 'sample' only"}},
        Broken{"sample_without_calls", {{"metric = \"exact\" }", "metric = \"sample\", seed = \"group\" }"}},
               {"task.toml:@: outputs[2].tolerance: missing required key 'calls'"}},
        Broken{"sample_calls_unknown_axis", {{"metric = \"exact\" }", "metric = \"sample\", seed = \"group\", calls = \"B\" }"}},
               {"task.toml:@: outputs[2].tolerance.calls = \"B\": uses axis 'B'"}},
        Broken{"sample_seed_not_an_int_scalar", {{"metric = \"exact\" }", "metric = \"sample\", seed = \"eps\", calls = \"64\" }"}},
               {"task.toml:", "outputs[2].tolerance.seed: 'eps' is not an int scalar of the task"}},
        Broken{"sample_on_a_float_output",
               {{"tolerance = { metric = \"numeric\", nmse = 1e-10, rtol = 1e-6, atol = 0.0 }",
                 "tolerance = { metric = \"sample\", seed = \"group\", calls = \"64\" }"}},
               {"task.toml:", "outputs[1].tolerance: metric 'sample' needs an integer output; 'scales' is f32"}},
        Broken{"numeric_without_nmse", {{"nmse = 1e-5, ", ""}},
               {"task.toml:@: outputs[0].tolerance: missing required key 'nmse'"}},
        Broken{"negative_atol", {{"atol = 0.002", "atol = -0.002"}},
               {"task.toml:@: outputs[0].tolerance.atol = -0.002: must not be negative"}},
        Broken{"duplicate_output", {{"name = \"argmax\"", "name = \"scales\""}},
               {"task.toml:@: outputs[2].name = \"scales\": another output has this name"}},
        Broken{"inplace_without_input", {{"name = \"x\"\n" + kOutputX, "name = \"y\"\n" + kOutputX}},
               {"task.toml:@: outputs[0].name = \"y\": is inplace but there is no input of this name"}},
        Broken{"inplace_dtype", {{kOutputX, "dtype = \"f16\"\nshape = [\"T\", \"H\"]\ninplace"}},
               {"task.toml:@: outputs[0].dtype = \"f16\": differs from the dtype of input 'x' (bf16)"}},
        Broken{"inplace_rank", {{"shape = [\"T\", \"H\"]\ninplace", "shape = [\"T\"]\ninplace"}},
               {"task.toml:@: outputs[0].shape = ", "has rank 1 but input 'x' it updates in place has rank 2"}},
        Broken{"inplace_shape", {{"shape = [\"T\", \"H\"]\ninplace", "shape = [\"H\", \"T\"]\ninplace"}},
               {"outputs[0]: in-place output 'x' has shape 4096x2048", "on workload 'llama3-8b-T2048'",
                "the input has shape 2048x4096"}},
        Broken{"output_shadows_input", {{"shape = [\"T\", \"H\"]\ninplace = true\n", "shape = [\"T\", \"H\"]\n"}},
               {"outputs[0].name = \"x\": is also an input's name; set inplace = true or rename it"}},
        Broken{"inplace_not_bool", {{"inplace = true", "inplace = \"yes\""}},
               {"task.toml:@: outputs[0].inplace = \"yes\": must be true or false"}},
        Broken{"compare_unknown_key", {{"[compare.x_dequant]\ntolerance", "[compare.x_dequant]\ntolerence"}},
               {"compare.x_dequant.tolerence: unknown key (known keys: tolerance)"}},
        // Scalars.
        Broken{"scalar_type", {{"type = \"float\"", "type = \"double\""}},
               {"task.toml:@: scalars[0].type = \"double\": must be \"float\" or \"int\""}},
        Broken{"int_scalar_fraction", {{"value = 128\n", "value = 128.5\n"}},
               {"task.toml:@: scalars[1].value = 128.5: must be an integer"}},
        Broken{"scalar_named_like_a_tensor", {{"name = \"group\"", "name = \"weight\""}},
               {"task.toml:@: scalars[1].name = \"weight\": another scalar or a tensor has this name"}},
        // Workloads.
        Broken{"duplicate_workload", {{"name = \"qwen2.5-7b-T7\"", "name = \"llama3-8b-T2048\""}},
               {"task.toml:@: workloads[1].name = \"llama3-8b-T2048\": another workload has this name"}},
        Broken{"workload_name_with_space", {{"name = \"qwen2.5-7b-T7\"", "name = \"qwen 7b\""}},
               {"task.toml:@: workloads[1].name = \"qwen 7b\": may hold only letters, digits"}},
        Broken{"smoke_not_a_bool", {{"smoke = true", "smoke = \"yes\""}},
               {"task.toml:@: workloads[1].smoke = \"yes\": must be true or false"}},
        Broken{"missing_model", {{"model = \"Qwen2.5-7B\"\n", ""}}, {"workloads[1]: missing required key 'model'"}},
        Broken{"zero_axis", {{kQwenAxes, "axes = { T = 0, H = 3584, G = 128 }"}},
               {"task.toml:@: workloads[1].axes.T = 0: must be a positive integer"}},
        Broken{"fractional_axis", {{kQwenAxes, "axes = { T = 7.5, H = 3584, G = 128 }"}},
               {"task.toml:@: workloads[1].axes.T = 7.5: must be a positive integer"}},
        Broken{"string_axis", {{kQwenAxes, "axes = { T = \"7\", H = 3584, G = 128 }"}},
               {"task.toml:@: workloads[1].axes.T = \"7\": must be a positive integer"}},
        Broken{"missing_axis", {{kQwenAxes, "axes = { T = 7, H = 3584 }"}},
               {"task.toml:@: workloads[1].axes: axis 'G' has no value"}},
        Broken{"undeclared_workload_axis", {{kQwenAxes, "axes = { T = 7, H = 3584, G = 128, K = 3 }"}},
               {"task.toml:@: workloads[1].axes.K = 3: 'K' is not a declared axis (T, H, G)"}},
        Broken{"unknown_scalar_override", {{"scalars = { eps = 1e-5 }", "scalars = { epsilon = 1e-5 }"}},
               {"task.toml:@: workloads[0].scalars.epsilon = ", "there is no scalar 'epsilon'"}},
        Broken{"int_scalar_override_fraction", {{"scalars = { eps = 1e-5 }", "scalars = { eps = 1e-5, group = 64.5 }"}},
               {"task.toml:@: workloads[0].scalars.group = 64.5: must be an integer"}},
        Broken{"layout_of_unknown_tensor", {{"layouts = { scales = \"col\" }", "layouts = { scale = \"col\" }"}},
               {"task.toml:@: workloads[0].layouts.scale = \"col\": there is no tensor 'scale'"}},
        Broken{"unknown_layout", {{"layouts = { scales = \"col\" }", "layouts = { scales = \"row\" }"}},
               {"task.toml:@: workloads[0].layouts.scales = \"row\": tensor 'scales' has no layout 'row' (its layouts: col)"}},
        Broken{"init_of_unknown_input", {{"inits = { residual", "inits = { resid"}},
               {"task.toml:@: workloads[0].inits.resid: there is no input 'resid'"}},
        Broken{"invalid_init_override", {{"residual = { std = 2.0 }", "residual = { std = -2.0 }"}},
               {"task.toml:@: workloads[0].inits.residual.std = -2.0: must be positive"}},
        Broken{"sparse_groups_group_not_a_power_of_two",
               {{"dist = \"ties\", quantum = 0.125", "dist = \"sparse_groups\", group = 96"}},
               {"task.toml:@: workloads[0].inits.x: group = 96 must be a power of two from 1 to 2^20"}},
        Broken{"sparse_groups_shares_above_one",
               {{"dist = \"ties\", quantum = 0.125", "dist = \"sparse_groups\", zero_share = 0.6, tiny_share = 0.5"}},
               {"task.toml:@: workloads[0].inits.x: zero_share (0.6) and tiny_share (0.5) must be shares"}},
        Broken{"init_override_key_not_for_the_dist", {{"dist = \"ties\"", "dist = \"uniform\""}},
               {"task.toml:@: workloads[0].inits.x.quantum = 0.125: does not apply to dist 'uniform'"}},
        Broken{"unknown_workload_key", {{"model = \"Qwen2.5-7B\"", "model = \"Qwen2.5-7B\"\nseed = 3"}},
               {"workloads[1].seed: unknown key"}},
        // Rules that need a workload's values.
        Broken{"fractional_shape",
               {{kQwenAxes, "axes = { T = 7, H = 3584, G = 100 }"}, {"\"ceil_div(H, G)\"]", "\"H / G\"]"}},
               {"task.toml:", "workloads[1] ('qwen2.5-7b-T7'): tensor 'scales' shape[1]: formula 'H / G' gives 35.84"}},
        Broken{"negative_stride", {{"strides = [\"2\"]", "strides = [\"0 - 2\"]"}},
               {"workloads[0] ('llama3-8b-T2048'): tensor 'ids' strides[0]: formula '0 - 2' gives -2"}},
        Broken{"negative_flops", {{"flops = \"4 * T * H\"", "flops = \"-4 * T * H\""}},
               {"workloads[0] ('llama3-8b-T2048'): flops gives", "not a finite non-negative number"}}),
    [](const testing::TestParamInfo<Broken>& info) { return std::string(info.param.rule); });

}  // namespace
}  // namespace d2k
