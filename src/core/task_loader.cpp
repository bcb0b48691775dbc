// Everything task.toml may hold is read through Fields, which rejects unknown keys up front, and every
// error goes through Source, which prefixes file:line and the field path. Rules that need values (shapes
// of in-place outputs, whole-number shapes) are checked by evaluating every workload once at load time,
// so a broken task fails here and not in the middle of a benchmark.
#include "core/task_loader.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <sstream>


#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/expr.hpp"
#include "core/toml_source.hpp"

namespace d2k {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kDists[] = {"normal", "uniform", "student_t", "ties", "randint", "sparse_groups"};

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "none" : out;
}

bool is_identifier(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  return std::all_of(name.begin(), name.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

// Workload names end up in file names and command-line filters.
bool is_workload_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '-' || c == '.';
  });
}

std::string index_path(const std::string& array, std::size_t i) { return fmt::format("{}[{}]", array, i); }

using Source = TomlSource;

std::string child(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

// One TOML table with a closed set of keys.
class Fields {
 public:
  Fields(const Source& source, const toml::table& table, std::string path,
         std::initializer_list<std::string_view> allowed)
      : source_(source), table_(table), path_(std::move(path)) {
    for (auto&& [key, node] : table) {
      if (std::find(allowed.begin(), allowed.end(), key.str()) == allowed.end()) {
        std::vector<std::string> known(allowed.begin(), allowed.end());
        source_.error(&node, child(path_, key.str()), fmt::format("unknown key (known keys: {})", join(known)));
      }
    }
  }

  std::string path(std::string_view key) const { return child(path_, key); }
  const toml::node* find(std::string_view key) const { return table_.get(key); }
  const toml::node& need(std::string_view key) const {
    const toml::node* node = table_.get(key);
    // The root table's "line" would be 1, which points nowhere useful.
    if (node == nullptr) source_.error(path_.empty() ? nullptr : &table_, path_, fmt::format("missing required key '{}'", key));
    return *node;
  }

 private:
  const Source& source_;
  const toml::table& table_;
  std::string path_;
};

std::string as_string(const Source& source, const toml::node& node, const std::string& field, bool allow_empty = false) {
  auto value = node.value_exact<std::string>();
  if (!value) source.bad(node, field, "must be a string");
  if (!allow_empty && value->empty()) source.bad(node, field, "must not be empty");
  return *value;
}

int64_t as_integer(const Source& source, const toml::node& node, const std::string& field) {
  auto value = node.value_exact<int64_t>();
  if (!value) source.bad(node, field, "must be an integer");
  return *value;
}

double as_number(const Source& source, const toml::node& node, const std::string& field) {
  if (!node.is_number()) source.bad(node, field, "must be a number");
  double value = *node.value<double>();
  if (!std::isfinite(value)) source.bad(node, field, "must be finite");
  return value;
}

bool as_bool(const Source& source, const toml::node& node, const std::string& field) {
  auto value = node.value_exact<bool>();
  if (!value) source.bad(node, field, "must be true or false");
  return *value;
}

// These two return pointers, never null: GCC 13's -Wdangling-reference takes a reference returned from a
// call with a temporary argument (the field path) for a dangling one.
const toml::table* table_at(const Source& source, const toml::node& node, const std::string& field) {
  if (!node.is_table()) source.bad(node, field, "must be a table");
  return node.as_table();
}

const toml::array* array_at(const Source& source, const toml::node& node, const std::string& field) {
  if (!node.is_array()) source.bad(node, field, "must be an array");
  return node.as_array();
}

// The elements of an array of tables ([[inputs]]), each with its path "inputs[i]".
std::vector<std::pair<const toml::table*, std::string>> tables_of(const Source& source, const toml::node& node,
                                                                  const std::string& field) {
  std::vector<std::pair<const toml::table*, std::string>> tables;
  const toml::array& array = *array_at(source, node, field);
  for (std::size_t i = 0; i < array.size(); ++i) {
    tables.emplace_back(table_at(source, array[i], index_path(field, i)), index_path(field, i));
  }
  return tables;
}

std::string as_name(const Source& source, const toml::node& node, const std::string& field) {
  std::string name = as_string(source, node, field);
  if (!is_identifier(name)) source.bad(node, field, "must be an identifier (letters, digits, _; not starting with a digit)");
  return name;
}

// A formula is a string or, for convenience, an integer; its axes must all be declared.
std::string as_formula(const Source& source, const toml::node& node, const std::string& field,
                       const std::vector<std::string>& axes) {
  std::string formula;
  if (node.is_integer()) {
    formula = std::to_string(*node.value_exact<int64_t>());
  } else {
    formula = as_string(source, node, field);
  }
  std::set<std::string> used;
  try {
    used = identifiers(formula);
  } catch (const Error& error) {
    source.bad(node, field, error.what());
  }
  for (const auto& name : used) {
    if (std::find(axes.begin(), axes.end(), name) == axes.end()) {
      source.bad(node, field, fmt::format("uses axis '{}', which is not declared in axes ({})", name, join(axes)));
    }
  }
  return formula;
}

std::vector<std::string> as_formulas(const Source& source, const toml::node& node, const std::string& field,
                                     const std::vector<std::string>& axes) {
  const toml::array& array = *array_at(source, node, field);
  std::vector<std::string> formulas;
  for (std::size_t i = 0; i < array.size(); ++i) {
    formulas.push_back(as_formula(source, array[i], index_path(field, i), axes));
  }
  return formulas;
}

// The keys each distribution reads; any other given key is a mistake (it would be ignored).
std::vector<std::string> init_keys(const std::string& dist) {
  if (dist == "normal") return {"mean", "std"};
  if (dist == "uniform" || dist == "randint") return {"low", "high"};
  if (dist == "student_t") return {"mean", "std", "df"};
  if (dist == "sparse_groups") return {"mean", "std", "group", "zero_share", "tiny_share", "tiny"};
  return {"mean", "std", "quantum", "nudge"};  // ties
}

// Reads an init table on top of `init` (the defaults for an input, the input's init for a workload's
// override), so a workload can change one parameter and keep the rest.
InputInit parse_init(const Source& source, const toml::node& node, const std::string& path, InputInit init) {
  const toml::table& table = *table_at(source, node, path);
  Fields fields(source, table, path,
                {"dist", "mean", "std", "low", "high", "df", "quantum", "nudge", "group", "zero_share", "tiny_share", "tiny"});
  if (const toml::node* dist = fields.find("dist")) {
    init.dist = as_string(source, *dist, fields.path("dist"));
    if (std::find(std::begin(kDists), std::end(kDists), init.dist) == std::end(kDists)) {
      source.bad(*dist, fields.path("dist"), "unknown distribution (known: normal, uniform, student_t, ties, randint, sparse_groups)");
    }
  }
  std::vector<std::string> applies = init_keys(init.dist);
  std::pair<std::string_view, double*> numbers[] = {
      {"mean", &init.mean},   {"std", &init.std},   {"low", &init.low},
      {"high", &init.high},   {"df", &init.df},     {"quantum", &init.quantum},   {"nudge", &init.nudge},
      {"group", &init.group}, {"zero_share", &init.zero_share}, {"tiny_share", &init.tiny_share},
      {"tiny", &init.tiny}};
  for (auto& [key, target] : numbers) {
    const toml::node* value = fields.find(key);
    if (value == nullptr) continue;
    if (std::find(applies.begin(), applies.end(), key) == applies.end()) {
      source.bad(*value, fields.path(key),
                 fmt::format("does not apply to dist '{}' (it uses: {})", init.dist, join(applies)));
    }
    *target = as_number(source, *value, fields.path(key));
  }
  auto positive = [&](std::string_view key, double value) {
    if (value <= 0) {
      const toml::node* at = fields.find(key);
      if (at != nullptr) source.bad(*at, fields.path(key), "must be positive");
      source.error(&table, path, fmt::format("{} = {} (inherited) must be positive", key, value));
    }
  };
  if (init.dist != "uniform" && init.dist != "randint") positive("std", init.std);
  if (init.dist == "student_t") positive("df", init.df);
  if (init.dist == "ties") positive("quantum", init.quantum);
  if (init.dist == "ties" && !(init.nudge >= 0 && init.nudge <= 1))
    source.error(&table, path, fmt::format("nudge = {} must be a share, from 0 to 1", init.nudge));
  if (init.dist == "sparse_groups") {
    positive("tiny", init.tiny);
    const double g = init.group;
    if (!(g >= 1 && g <= (1 << 20) && g == std::floor(g) && (static_cast<int64_t>(g) & (static_cast<int64_t>(g) - 1)) == 0))
      source.error(&table, path, fmt::format("group = {} must be a power of two from 1 to 2^20", g));
    if (!(init.zero_share >= 0 && init.tiny_share >= 0 && init.zero_share + init.tiny_share <= 1))
      source.error(&table, path, fmt::format("zero_share ({}) and tiny_share ({}) must be shares: at least 0, at most 1 "
                                             "together", init.zero_share, init.tiny_share));
  }
  if (init.dist == "uniform" || init.dist == "randint") {
    if (!(init.low < init.high)) {
      source.error(&table, path, fmt::format("low ({}) must be less than high ({})", init.low, init.high));
    }
  }
  if (init.dist == "randint" && (init.low != std::floor(init.low) || init.high != std::floor(init.high))) {
    source.error(&table, path, fmt::format("randint needs integer low and high, got {} and {}", init.low, init.high));
  }
  return init;
}

Tolerance parse_tolerance(const Source& source, const toml::node& node, const std::string& path,
                          const std::vector<std::string>& axes) {
  const toml::table& table = *table_at(source, node, path);
  Fields fields(source, table, path, {"metric", "nmse", "rtol", "atol", "atol_scale", "misrounded", "labels", "block", "pad", "seed", "calls"});
  Tolerance tolerance;
  if (const toml::node* metric = fields.find("metric")) {
    std::string name = as_string(source, *metric, fields.path("metric"));
    if (name == "exact") {
      tolerance.metric = Tolerance::Metric::exact;
    } else if (name == "segments") {
      tolerance.metric = Tolerance::Metric::segments;
    } else if (name == "sample") {
      tolerance.metric = Tolerance::Metric::sample;
    } else if (name != "numeric") {
      source.bad(*metric, fields.path("metric"), "unknown metric (known: numeric, exact, segments, sample)");
    }
  }
  // segments: the output naming each block's segment, the block's length and the pad value; the loader
  // checks that `labels` is a 1-D integer output once every output is read (check_segments).
  for (const char* key : {"labels", "block", "pad"}) {
    const toml::node* value = fields.find(key);
    if (tolerance.metric != Tolerance::Metric::segments) {
      if (value) source.bad(*value, fields.path(key), "applies to metric 'segments' only");
      continue;
    }
    const toml::node& given = fields.need(key);
    if (std::string_view(key) == "labels") tolerance.labels = as_name(source, given, fields.path(key));
    else (std::string_view(key) == "block" ? tolerance.block : tolerance.pad) = as_formula(source, given, fields.path(key), axes);
  }
  // sample: the int scalar the seeded calls set and how many of them; the loader checks that `seed` is
  // an int scalar once every scalar is read (check_samples).
  for (const char* key : {"seed", "calls"}) {
    const toml::node* value = fields.find(key);
    if (tolerance.metric != Tolerance::Metric::sample) {
      if (value) source.bad(*value, fields.path(key), "applies to metric 'sample' only");
      continue;
    }
    const toml::node& given = fields.need(key);
    if (std::string_view(key) == "seed") tolerance.seed = as_name(source, given, fields.path(key));
    else tolerance.calls = as_formula(source, given, fields.path(key), axes);
  }
  std::pair<std::string_view, double*> bounds[] = {
      {"nmse", &tolerance.nmse}, {"rtol", &tolerance.rtol}, {"atol", &tolerance.atol}};
  const char* metric_name = tolerance.metric == Tolerance::Metric::exact      ? "exact"
                            : tolerance.metric == Tolerance::Metric::segments ? "segments"
                                                                              : "sample";
  for (auto& [key, target] : bounds) {
    if (tolerance.metric != Tolerance::Metric::numeric) {
      if (const toml::node* value = fields.find(key)) {
        source.bad(*value, fields.path(key), fmt::format("does not apply to metric '{}'", metric_name));
      }
      continue;
    }
    // Numeric tolerances are a deliberate choice per dtype: no silent defaults.
    const toml::node& value = fields.need(key);
    *target = as_number(source, value, fields.path(key));
    if (*target < 0) source.bad(value, fields.path(key), "must not be negative");
  }
  if (const toml::node* value = fields.find("atol_scale")) {
    if (tolerance.metric != Tolerance::Metric::numeric)
      source.bad(*value, fields.path("atol_scale"), fmt::format("does not apply to metric '{}'", metric_name));
    const std::string scale = as_string(source, *value, fields.path("atol_scale"));
    if (scale == "row") tolerance.atol_scale = Tolerance::AtolScale::row;
    else if (scale != "output") source.bad(*value, fields.path("atol_scale"), "unknown scale (known: output, row)");
  }
  if (const toml::node* value = fields.find("misrounded")) {
    if (tolerance.metric != Tolerance::Metric::numeric)
      source.bad(*value, fields.path("misrounded"), fmt::format("does not apply to metric '{}'", metric_name));
    const double share = as_number(source, *value, fields.path("misrounded"));
    if (share < 0 || share > 1) source.bad(*value, fields.path("misrounded"), "is a share of the elements: between 0 and 1");
    tolerance.misrounded = share;
  }
  return tolerance;
}

class TaskReader {
 public:
  TaskReader(const fs::path& task_dir, const fs::path& tasks_root)
      : task_dir_(task_dir), tasks_root_(tasks_root), source_(task_dir / "task.toml") {}

  Task read() {
    toml::table root;
    try {
      root = toml::parse_file(source_.file());
    } catch (const toml::parse_error& error) {
      fail("{}:{}:{}: invalid TOML: {}", source_.file(), error.source().begin.line, error.source().begin.column,
           error.description());
    }
    task_.dir = task_dir_;
    read_name(root);
    Fields fields(source_, root, "",
                  {"summary", "source", "baseline", "library", "description", "axes", "flops", "min_bytes",
                   "flops_dtype", "deterministic", "inputs", "outputs", "scalars", "compare", "workloads"});
    task_.summary = as_string(source_, fields.need("summary"), "summary");
    if (task_.summary.find('\n') != std::string::npos) source_.bad(fields.need("summary"), "summary", "must be one line");
    task_.source = as_string(source_, fields.need("source"), "source");
    task_.baseline = as_string(source_, fields.need("baseline"), "baseline");
    if (const toml::node* library = fields.find("library")) {
      task_.library = as_string(source_, *library, "library");
      if (task_.library.find('\n') != std::string::npos) source_.bad(*library, "library", "must be one line");
    }
    task_.description = as_string(source_, fields.need("description"), "description");
    read_axes(fields.need("axes"));
    task_.flops = as_formula(source_, fields.need("flops"), "flops", task_.axes);
    task_.min_bytes = as_formula(source_, fields.need("min_bytes"), "min_bytes", task_.axes);
    if (const toml::node* node = fields.find("flops_dtype")) read_flops_dtype(*node);
    if (const toml::node* node = fields.find("deterministic")) task_.deterministic = as_bool(source_, *node, "deterministic");
    read_inputs(fields.need("inputs"));
    read_outputs(fields.need("outputs"));
    if (const toml::node* scalars = fields.find("scalars")) read_scalars(*scalars);
    check_samples();
    if (const toml::node* compare = fields.find("compare")) read_compare(*compare);
    read_workloads(fields.need("workloads"));
    check_workloads();
    task_.guidance = load_guidance(task_dir_ / "guidance.md");
    return std::move(task_);
  }

 private:
  // The name is the folder's path under the tasks root, written nowhere else: a task.toml that still
  // names itself (the format before) would be a second copy that can disagree.
  void read_name(const toml::table& root) {
    task_.name =
        fs::weakly_canonical(task_dir_).lexically_relative(fs::weakly_canonical(tasks_root_)).generic_string();
    if (const toml::node* name = root.get("name")) {
      source_.error(name, "name", fmt::format("a task's name comes from its folder ('{}'); delete this line", task_.name));
    }
    if (!is_task_name(task_.name)) {
      fail("{}: the folder '{}' under the tasks root {} is not a task name: <family>/<name>, each lowercase "
           "letters, digits and '_', starting with a letter",
           task_dir_.string(), task_.name, tasks_root_.string());
    }
  }

  // Only the rates d2k measures (timing/ceilings.hpp) can be a floor's denominator.
  void read_flops_dtype(const toml::node& node) {
    const std::string name = as_string(source_, node, "flops_dtype");
    const auto parsed = parse_dtype(name);
    if (!parsed || (*parsed != DType::bf16 && *parsed != DType::f8e4m3 && *parsed != DType::i8))
      source_.bad(node, "flops_dtype", fmt::format("'{}' is not a measured matrix rate (bf16, f8e4m3, i8)", name));
    task_.flops_dtype = *parsed;
  }

  void read_axes(const toml::node& node) {
    const toml::array& array = *array_at(source_, node, "axes");
    for (std::size_t i = 0; i < array.size(); ++i) {
      std::string axis = as_name(source_, array[i], index_path("axes", i));
      if (std::find(task_.axes.begin(), task_.axes.end(), axis) != task_.axes.end()) {
        source_.bad(array[i], index_path("axes", i), "is declared twice");
      }
      task_.axes.push_back(axis);
    }
  }

  // What inputs and outputs share: name, dtype, shape, strides, layouts.
  TensorSpec read_tensor(const Fields& fields) {
    TensorSpec spec;
    spec.name = as_name(source_, fields.need("name"), fields.path("name"));
    const toml::node& dtype = fields.need("dtype");
    auto parsed = parse_dtype(as_string(source_, dtype, fields.path("dtype")));
    if (!parsed) source_.bad(dtype, fields.path("dtype"), "unknown dtype (known: f32 f16 bf16 f8e4m3 f64 i32 i64 i8 u8)");
    spec.dtype = *parsed;
    const toml::node& shape = fields.need("shape");
    spec.shape = as_formulas(source_, shape, fields.path("shape"), task_.axes);
    if (spec.shape.size() > D2K_MAX_RANK) {
      source_.bad(shape, fields.path("shape"), fmt::format("has rank {}, more than {}", spec.shape.size(), D2K_MAX_RANK));
    }
    auto check_rank = [&](const toml::node& node, const std::string& field, const std::vector<std::string>& strides) {
      if (strides.size() != spec.shape.size()) {
        source_.bad(node, field, fmt::format("has {} strides for {} dimensions", strides.size(), spec.shape.size()));
      }
    };
    if (const toml::node* strides = fields.find("strides")) {
      spec.strides = as_formulas(source_, *strides, fields.path("strides"), task_.axes);
      check_rank(*strides, fields.path("strides"), spec.strides);
    }
    if (const toml::node* layouts = fields.find("layouts")) {
      for (auto&& [key, node] : *table_at(source_, *layouts, fields.path("layouts"))) {
        std::string field = child(fields.path("layouts"), key.str());
        if (!is_identifier(key.str())) source_.error(&node, field, "a layout name must be an identifier");
        auto strides = as_formulas(source_, node, field, task_.axes);
        check_rank(node, field, strides);
        spec.layouts.emplace(std::string(key.str()), std::move(strides));
      }
    }
    return spec;
  }

  void read_inputs(const toml::node& node) {
    for (auto [table, path] : tables_of(source_, node, "inputs")) {
      Fields fields(source_, *table, path, {"name", "dtype", "shape", "strides", "layouts", "init", "prepare", "perturb",
                                                  "relabel"});
      TensorSpec spec = read_tensor(fields);
      if (task_.find_input(spec.name)) source_.bad(fields.need("name"), fields.path("name"), "another input has this name");
      if (const toml::node* init = fields.find("init")) spec.init = parse_init(source_, *init, fields.path("init"), {});
      read_visibility(fields, spec);
      read_relabel(fields, spec);
      task_.inputs.push_back(std::move(spec));
    }
    if (task_.inputs.empty()) source_.error(&node, "inputs", "a task needs at least one input");
  }

  // What d2k_prepare may see and what the harness may perturb between timed calls (issue 10): prepare
  // sees weights, never activations, and perturbing what prepare saw would make its work stale.
  void read_visibility(const Fields& fields, TensorSpec& spec) {
    if (const toml::node* prepare = fields.find("prepare")) spec.prepare = as_bool(source_, *prepare, fields.path("prepare"));
    spec.perturb = is_floating(spec.dtype) && !spec.prepare;
    const toml::node* perturb = fields.find("perturb");
    if (perturb == nullptr) return;
    spec.perturb = as_bool(source_, *perturb, fields.path("perturb"));
    if (spec.perturb && spec.prepare) {
      source_.bad(*perturb, fields.path("perturb"),
                  "contradicts prepare = true: d2k_prepare sees this input once, so changing it between calls would "
                  "make what prepare computed from it stale");
    }
    if (spec.perturb && spec.shape.empty()) {
      source_.bad(*perturb, fields.path("perturb"), "a rank-0 input has no row to swap elements within");
    }
  }

  // `relabel` (core/call_patch.hpp) is a way to perturb: it implies perturb, so it contradicts
  // perturb = false and prepare = true; its formula is checked on every workload (check_workloads).
  void read_relabel(const Fields& fields, TensorSpec& spec) {
    const toml::node* relabel = fields.find("relabel");
    if (relabel == nullptr) return;
    const auto* text = relabel->as_string();
    if (text == nullptr) source_.bad(*relabel, fields.path("relabel"), "must be a formula (a string) in the axes");
    spec.relabel = text->get();
    if (spec.shape.empty()) source_.bad(*relabel, fields.path("relabel"), "a rank-0 input has no dimension to relabel");
    if (spec.prepare) {
      source_.bad(*relabel, fields.path("relabel"),
                  "contradicts prepare = true: d2k_prepare sees this input once, so relabelling it between calls "
                  "would make what prepare computed from it stale");
    }
    if (const toml::node* perturb = fields.find("perturb"); perturb != nullptr && !spec.perturb) {
      source_.bad(*perturb, fields.path("perturb"), "perturb = false contradicts relabel, which is a way to perturb");
    }
    spec.perturb = true;
  }

  void read_outputs(const toml::node& node) {
    for (auto [table, path] : tables_of(source_, node, "outputs")) {
      Fields fields(source_, *table, path, {"name", "dtype", "shape", "strides", "layouts", "inplace", "tolerance"});
      TensorSpec spec = read_tensor(fields);
      const toml::node& name = fields.need("name");
      if (task_.find_output(spec.name)) source_.bad(name, fields.path("name"), "another output has this name");
      if (const toml::node* inplace = fields.find("inplace")) spec.inplace = as_bool(source_, *inplace, fields.path("inplace"));
      const TensorSpec* input = task_.find_input(spec.name);
      if (spec.inplace && input == nullptr) {
        source_.bad(name, fields.path("name"), "is inplace but there is no input of this name");
      }
      if (!spec.inplace && input != nullptr) {
        source_.bad(name, fields.path("name"), "is also an input's name; set inplace = true or rename it");
      }
      if (spec.inplace && spec.dtype != input->dtype) {
        source_.bad(fields.need("dtype"), fields.path("dtype"),
                    fmt::format("differs from the dtype of input '{}' ({}) it updates in place", input->name,
                                name_of(input->dtype)));
      }
      if (spec.inplace && spec.shape.size() != input->shape.size()) {
        source_.bad(fields.need("shape"), fields.path("shape"),
                    fmt::format("has rank {} but input '{}' it updates in place has rank {}", spec.shape.size(),
                                input->name, input->shape.size()));
      }
      spec.tolerance = parse_tolerance(source_, fields.need("tolerance"), fields.path("tolerance"), task_.axes);
      output_nodes_.push_back(table);
      task_.outputs.push_back(std::move(spec));
    }
    if (task_.outputs.empty()) source_.error(&node, "outputs", "a task needs at least one output");
    check_segments();
  }

  // A segments output and its labels are 1-D integer outputs (a segment is a run of blocks of one).
  void check_segments() {
    for (std::size_t o = 0; o < task_.outputs.size(); ++o) {
      const TensorSpec& output = task_.outputs[o];
      if (output.tolerance.metric != Tolerance::Metric::segments) continue;
      const std::string field = index_path("outputs", o) + ".tolerance";
      if (output.shape.size() != 1 || is_floating(output.dtype)) {
        source_.error(output_nodes_[o], field, fmt::format("metric 'segments' needs a 1-D integer output; '{}' is {} of rank {}",
                                                          output.name, name_of(output.dtype), output.shape.size()));
      }
      const TensorSpec* labels = task_.find_output(output.tolerance.labels);
      if (labels == nullptr || labels == &output || labels->shape.size() != 1 || is_floating(labels->dtype)) {
        source_.error(output_nodes_[o], field + ".labels",
                      fmt::format("'{}' is not another 1-D integer output (the label of each block)", output.tolerance.labels));
      }
    }
  }

  // A sampled output is an integer output, at most one per task (the seeded calls set one seed), and its
  // seed an int scalar.
  void check_samples() {
    int sampled = 0;
    for (std::size_t o = 0; o < task_.outputs.size(); ++o) {
      const TensorSpec& output = task_.outputs[o];
      if (output.tolerance.metric != Tolerance::Metric::sample) continue;
      const std::string field = index_path("outputs", o) + ".tolerance";
      if (is_floating(output.dtype))
        source_.error(output_nodes_[o], field, fmt::format("metric 'sample' needs an integer output; '{}' is {}",
                                                          output.name, name_of(output.dtype)));
      if (++sampled > 1) source_.error(output_nodes_[o], field, "metric 'sample': at most one sampled output per task");
      const auto seed = std::find_if(task_.scalars.begin(), task_.scalars.end(),
                                     [&](const ScalarSpec& s) { return s.name == output.tolerance.seed; });
      if (seed == task_.scalars.end() || !seed->is_int)
        source_.error(output_nodes_[o], field + ".seed",
                      fmt::format("'{}' is not an int scalar of the task (the seed the seeded calls set)", output.tolerance.seed));
    }
  }

  bool is_tensor(const std::string& name) const { return task_.find_input(name) || task_.find_output(name); }

  void read_scalars(const toml::node& node) {
    for (auto [table, path] : tables_of(source_, node, "scalars")) {
      Fields fields(source_, *table, path, {"name", "type", "value"});
      ScalarSpec scalar;
      const toml::node& name = fields.need("name");
      scalar.name = as_name(source_, name, fields.path("name"));
      auto same = [&](const ScalarSpec& other) { return other.name == scalar.name; };
      if (std::any_of(task_.scalars.begin(), task_.scalars.end(), same) || is_tensor(scalar.name)) {
        source_.bad(name, fields.path("name"), "another scalar or a tensor has this name");
      }
      const toml::node& type = fields.need("type");
      std::string type_name = as_string(source_, type, fields.path("type"));
      if (type_name != "int" && type_name != "float") source_.bad(type, fields.path("type"), "must be \"float\" or \"int\"");
      scalar.is_int = type_name == "int";
      scalar.value = scalar_value(scalar, fields.need("value"), fields.path("value"));
      task_.scalars.push_back(scalar);
    }
  }

  double scalar_value(const ScalarSpec& scalar, const toml::node& node, const std::string& field) const {
    if (scalar.is_int) return static_cast<double>(as_integer(source_, node, field));
    return as_number(source_, node, field);
  }

  void read_compare(const toml::node& node) {
    for (auto&& [key, entry] : *table_at(source_, node, "compare")) {
      std::string path = child("compare", key.str());
      if (!is_identifier(key.str())) source_.error(&entry, path, "a compared name must be an identifier");
      Fields fields(source_, *table_at(source_, entry, path), path, {"tolerance"});
      task_.compare.emplace(std::string(key.str()),
                            parse_tolerance(source_, fields.need("tolerance"), fields.path("tolerance"), task_.axes));
    }
  }

  void read_workloads(const toml::node& node) {
    for (auto [table, path] : tables_of(source_, node, "workloads")) {
      Fields fields(source_, *table, path, {"name", "model", "hidden", "smoke", "axes", "scalars", "layouts", "inits"});
      Workload workload;
      const toml::node& name = fields.need("name");
      workload.name = as_string(source_, name, fields.path("name"));
      if (!is_workload_name(workload.name)) source_.bad(name, fields.path("name"), "may hold only letters, digits, '-', '_' and '.'");
      if (task_.find_workload(workload.name)) source_.bad(name, fields.path("name"), "another workload has this name");
      workload.model = as_string(source_, fields.need("model"), fields.path("model"));
      if (const toml::node* hidden = fields.find("hidden")) workload.hidden = as_bool(source_, *hidden, fields.path("hidden"));
      if (const toml::node* smoke = fields.find("smoke")) workload.smoke = as_bool(source_, *smoke, fields.path("smoke"));
      read_workload_axes(fields, workload);
      if (const toml::node* scalars = fields.find("scalars")) read_workload_scalars(*scalars, fields.path("scalars"), workload);
      if (const toml::node* layouts = fields.find("layouts")) read_workload_layouts(*layouts, fields.path("layouts"), workload);
      if (const toml::node* inits = fields.find("inits")) {
        for (auto&& [key, entry] : *table_at(source_, *inits, fields.path("inits"))) {
          std::string field = child(fields.path("inits"), key.str());
          const TensorSpec* input = task_.find_input(std::string(key.str()));
          if (input == nullptr) source_.error(&entry, field, fmt::format("there is no input '{}'", key.str()));
          workload.inits.emplace(input->name, parse_init(source_, entry, field, input->init));
        }
      }
      workload_nodes_.push_back(table);
      task_.workloads.push_back(std::move(workload));
    }
    if (task_.workloads.empty()) source_.error(&node, "workloads", "a task needs at least one workload");
  }

  void read_workload_axes(const Fields& fields, Workload& workload) {
    const toml::node& node = fields.need("axes");
    for (auto&& [key, value] : *table_at(source_, node, fields.path("axes"))) {
      std::string field = child(fields.path("axes"), key.str());
      std::string axis(key.str());
      if (std::find(task_.axes.begin(), task_.axes.end(), axis) == task_.axes.end()) {
        source_.bad(value, field, fmt::format("'{}' is not a declared axis ({})", axis, join(task_.axes)));
      }
      auto extent = value.value_exact<int64_t>();
      if (!extent || *extent <= 0) source_.bad(value, field, "must be a positive integer");
      workload.axes.emplace(axis, *extent);
    }
    for (const auto& axis : task_.axes) {
      if (!workload.axes.count(axis)) source_.error(&node, fields.path("axes"), fmt::format("axis '{}' has no value", axis));
    }
  }

  void read_workload_scalars(const toml::node& node, const std::string& path, Workload& workload) {
    for (auto&& [key, value] : *table_at(source_, node, path)) {
      std::string field = child(path, key.str());
      auto same = [&](const ScalarSpec& scalar) { return scalar.name == key.str(); };
      auto scalar = std::find_if(task_.scalars.begin(), task_.scalars.end(), same);
      if (scalar == task_.scalars.end()) source_.bad(value, field, fmt::format("there is no scalar '{}'", key.str()));
      workload.scalars.emplace(scalar->name, scalar_value(*scalar, value, field));
    }
  }

  void read_workload_layouts(const toml::node& node, const std::string& path, Workload& workload) {
    for (auto&& [key, value] : *table_at(source_, node, path)) {
      std::string field = child(path, key.str());
      std::string tensor(key.str());
      std::string layout = as_string(source_, value, field);
      if (!is_tensor(tensor)) source_.bad(value, field, fmt::format("there is no tensor '{}'", tensor));
      // An in-place output and its input share the name, so the choice must exist in both.
      for (const TensorSpec* spec : {task_.find_input(tensor), task_.find_output(tensor)}) {
        if (spec == nullptr || spec->layouts.count(layout)) continue;
        std::vector<std::string> known;
        for (const auto& [known_name, strides] : spec->layouts) known.push_back(known_name);
        source_.bad(value, field, fmt::format("tensor '{}' has no layout '{}' (its layouts: {})", tensor, layout, join(known)));
      }
      workload.layouts.emplace(tensor, layout);
    }
  }

  // Evaluates every formula on every workload: shapes and strides must be whole numbers, an in-place
  // output must have exactly its input's geometry, FLOPs and bytes must be finite and non-negative.
  void check_workloads() {
    for (std::size_t w = 0; w < task_.workloads.size(); ++w) {
      const Workload& workload = task_.workloads[w];
      std::string field = index_path("workloads", w);
      const toml::node* at = workload_nodes_[w];
      try {
        for (const auto& input : task_.inputs) {
          geometry_of(input, workload);
          relabel_block_of(task_, input, workload);
        }
        for (std::size_t o = 0; o < task_.outputs.size(); ++o) {
          const TensorSpec& output = task_.outputs[o];
          Geometry geometry = geometry_of(output, workload);
          if (!output.inplace) continue;
          Geometry input = geometry_of(*task_.find_input(output.name), workload);
          if (geometry.shape != input.shape || geometry.strides != input.strides) {
            source_.error(output_nodes_[o], index_path("outputs", o),
                          fmt::format("in-place output '{}' has shape {} strides {} on workload '{}', but the input has "
                                      "shape {} strides {}",
                                      output.name, fmt::join(geometry.shape, "x"), fmt::join(geometry.strides, ","),
                                      workload.name, fmt::join(input.shape, "x"), fmt::join(input.strides, ",")));
          }
        }
        for (auto [name, value] : {std::pair{"flops", flops_of(task_, workload)},
                                   std::pair{"min_bytes", min_bytes_of(task_, workload)}}) {
          if (!std::isfinite(value) || value < 0) {
            fail("{} gives {} for workload '{}', not a finite non-negative number", name, value, workload.name);
          }
        }
      } catch (const Error& error) {
        if (std::string_view(error.what()).substr(0, source_.file().size()) == source_.file()) throw;
        source_.error(at, fmt::format("{} ('{}')", field, workload.name), error.what());
      }
    }
  }

  fs::path task_dir_;
  fs::path tasks_root_;
  Source source_;
  Task task_;
  std::vector<const toml::table*> output_nodes_;
  std::vector<const toml::table*> workload_nodes_;
};

}  // namespace

Task load_task(const fs::path& task_dir, const fs::path& tasks_root) {
  if (!fs::is_regular_file(task_dir / "task.toml")) fail("{}: no such file", (task_dir / "task.toml").string());
  return TaskReader(task_dir, tasks_root).read();
}

std::vector<Task> load_tasks(const fs::path& tasks_root) {
  if (!fs::is_directory(tasks_root)) fail("{}: the tasks root is not a directory", tasks_root.string());
  std::vector<Task> tasks;
  for (const auto& family : fs::directory_iterator(tasks_root)) {
    if (!family.is_directory()) continue;
    for (const auto& dir : fs::directory_iterator(family.path())) {
      if (dir.is_directory() && fs::is_regular_file(dir.path() / "task.toml")) {
        tasks.push_back(load_task(dir.path(), tasks_root));
      }
    }
  }
  std::sort(tasks.begin(), tasks.end(), [](const Task& a, const Task& b) { return a.name < b.name; });
  return tasks;
}

namespace {

// The names of the tasks under tasks_root, from their folders alone (nothing is read): for the error of
// an unknown name.
std::vector<std::string> task_names(const fs::path& tasks_root) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& family : fs::directory_iterator(tasks_root, error)) {
    if (!family.is_directory()) continue;
    for (const auto& dir : fs::directory_iterator(family.path(), error))
      if (fs::is_regular_file(dir.path() / "task.toml"))
        names.push_back(family.path().filename().string() + "/" + dir.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

Task load_task(const fs::path& tasks_root, const std::string& name) {
  // "<family>/<name>" and nothing else: no path may lead out of tasks_root.
  const fs::path relative(name);
  const bool well_formed = std::distance(relative.begin(), relative.end()) == 2 &&
                           std::none_of(relative.begin(), relative.end(), [](const fs::path& part) {
                             return part.empty() || part == "." || part == "..";
                           });
  const fs::path dir = tasks_root / relative;
  if (!well_formed || relative.is_absolute() || !fs::is_regular_file(dir / "task.toml"))
    fail("no task '{}' (known: {})", name, fmt::join(task_names(tasks_root), ", "));
  return load_task(dir, tasks_root);
}

}  // namespace d2k
