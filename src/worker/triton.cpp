#include "worker/triton.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "triton/d2k_triton_source.hpp"
#include "worker/leftovers.hpp"

namespace d2k {
namespace {

// CPython's C API, looked up in the libpython the request names: the worker is built without Python's
// headers and runs with whichever CPython the Triton it is given was installed for.
using PyObject = void;
using Py_ssize_t = long;
constexpr int kPyFileInput = 257;  // Py_file_input

struct PythonApi {
  void (*Py_InitializeEx)(int) = nullptr;
  int* Py_NoSiteFlag = nullptr;
  int* Py_DontWriteBytecodeFlag = nullptr;
  PyObject* (*Py_CompileString)(const char*, const char*, int) = nullptr;
  PyObject* (*PyImport_ExecCodeModule)(const char*, PyObject*) = nullptr;
  PyObject* (*PyObject_GetAttrString)(PyObject*, const char*) = nullptr;
  PyObject* (*PyObject_CallObject)(PyObject*, PyObject*) = nullptr;
  PyObject* (*Py_BuildValue)(const char*, ...) = nullptr;
  PyObject* (*PyList_New)(Py_ssize_t) = nullptr;
  int (*PyList_Append)(PyObject*, PyObject*) = nullptr;
  PyObject* (*PyTuple_GetItem)(PyObject*, Py_ssize_t) = nullptr;
  long long (*PyLong_AsLongLong)(PyObject*) = nullptr;
  const char* (*PyUnicode_AsUTF8)(PyObject*) = nullptr;
  void (*Py_DecRef)(PyObject*) = nullptr;
  void (*PyErr_Print)() = nullptr;
};

struct State {
  PythonApi api;
  PyObject* runtime = nullptr;  // the module d2k_triton
  PyObject* run = nullptr;
  PyObject* workspace_size = nullptr;
  PyObject* refused = nullptr;
  std::vector<std::string> input_names, output_names;
  std::vector<bool> output_inplace;
};

State& state() {
  static State s;
  return s;
}

template <typename F>
void lookup(void* handle, F& fn, const char* name, const std::string& library) {
  fn = reinterpret_cast<F>(::dlsym(handle, name));
  if (fn == nullptr) fail("{} has no {} (is it a CPython 3.10+ library?)", library, name);
}

// A Python object owned here (one reference).
class Ref {
 public:
  explicit Ref(PyObject* object = nullptr) : object_(object) {}
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  ~Ref() {
    if (object_ != nullptr) state().api.Py_DecRef(object_);
  }
  PyObject* get() const { return object_; }
  explicit operator bool() const { return object_ != nullptr; }

 private:
  PyObject* object_;
};

// A call into the runtime that returns (code, message-or-number); a Python error escaping it is the
// harness's (the runtime catches the solution's).
struct Answer {
  long long code = 1;
  std::string message;
  long long number = 0;
};

Answer answer_of(PyObject* result, const char* what) {
  const PythonApi& py = state().api;
  Ref owned(result);
  if (result == nullptr) {
    py.PyErr_Print();
    return {1, fmt::format("d2k's Triton runtime failed in {} (its traceback is in the log)", what), 0};
  }
  Answer answer;
  answer.code = py.PyLong_AsLongLong(py.PyTuple_GetItem(result, 0));
  if (const char* text = py.PyUnicode_AsUTF8(py.PyTuple_GetItem(result, 1))) answer.message = text;
  if (answer.code == 0 && !answer.message.empty()) answer.number = std::strtoll(answer.message.c_str(), nullptr, 10);
  return answer;
}

PyObject* attr(PyObject* object, const char* name) {
  PyObject* found = state().api.PyObject_GetAttrString(object, name);
  if (found == nullptr) {
    state().api.PyErr_Print();
    fail("d2k's Triton runtime has no {}", name);
  }
  return found;
}

// The call's pointers, in the runtime's tensor order: the inputs, then the outputs not in place.
PyObject* pointers_of(const d2k_call* call) {
  const PythonApi& py = state().api;
  PyObject* list = py.PyList_New(0);
  for (int32_t i = 0; i < call->num_inputs; ++i) {
    Ref item(py.Py_BuildValue("K", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(call->inputs[i].data))));
    py.PyList_Append(list, item.get());
  }
  for (int32_t o = 0; o < call->num_outputs; ++o) {
    if (state().output_inplace[static_cast<std::size_t>(o)]) continue;
    Ref item(py.Py_BuildValue("K", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(call->outputs[o].data))));
    py.PyList_Append(list, item.get());
  }
  return list;
}

PyObject* scalars_of(const d2k_call* call) {
  const PythonApi& py = state().api;
  PyObject* list = py.PyList_New(0);
  for (int32_t s = 0; s < call->num_scalars; ++s) {
    const d2k_scalar& scalar = call->scalars[s];
    Ref item(scalar.kind == D2K_SCALAR_INT ? py.Py_BuildValue("L", static_cast<long long>(scalar.i))
                                           : py.Py_BuildValue("d", scalar.f));
    py.PyList_Append(list, item.get());
  }
  return list;
}

int report(const d2k_call* call, const Answer& answer) {
  if (answer.code == 0) return 0;
  std::snprintf(call->error, D2K_ERROR_CAPACITY, "%s", answer.message.c_str());
  return static_cast<int>(answer.code);
}

extern "C" int triton_run(const d2k_call* call) {
  const PythonApi& py = state().api;
  Ref args(py.Py_BuildValue("(KNKKN)", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(call->stream)),
                            pointers_of(call), static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(call->workspace)),
                            static_cast<unsigned long long>(call->workspace_bytes), scalars_of(call)));
  return report(call, answer_of(py.PyObject_CallObject(state().run, args.get()), "run"));
}

extern "C" int triton_workspace_size(const d2k_call* call, size_t* bytes) {
  const PythonApi& py = state().api;
  Ref args(py.Py_BuildValue("(NN)", pointers_of(call), scalars_of(call)));
  const Answer answer = answer_of(py.PyObject_CallObject(state().workspace_size, args.get()), "workspace_size");
  if (answer.code != 0) return report(call, answer);
  *bytes = static_cast<size_t>(answer.number);
  return 0;
}

}  // namespace

void start_triton(const WirePython& python) {
  State& s = state();
  if (s.runtime != nullptr) return;
  // The interpreter's own settings: its home (the standard library), nothing of the user's, no .pyc
  // written (the sandbox's folders are read-only), no site-packages (Triton's folder alone goes on the path).
  ::setenv("PYTHONHOME", python.home.c_str(), 1);
  ::unsetenv("PYTHONPATH");
  ::unsetenv("PYTHONSTARTUP");
  ::setenv("PYTHONNOUSERSITE", "1", 1);
  ::setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
  void* handle = ::dlopen(python.library.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    fail("cannot load the Python library {}: {}", python.library, why ? why : "unknown dlopen error");
  }
  PythonApi& py = s.api;
  lookup(handle, py.Py_InitializeEx, "Py_InitializeEx", python.library);
  lookup(handle, py.Py_NoSiteFlag, "Py_NoSiteFlag", python.library);
  lookup(handle, py.Py_DontWriteBytecodeFlag, "Py_DontWriteBytecodeFlag", python.library);
  lookup(handle, py.Py_CompileString, "Py_CompileString", python.library);
  lookup(handle, py.PyImport_ExecCodeModule, "PyImport_ExecCodeModule", python.library);
  lookup(handle, py.PyObject_GetAttrString, "PyObject_GetAttrString", python.library);
  lookup(handle, py.PyObject_CallObject, "PyObject_CallObject", python.library);
  lookup(handle, py.Py_BuildValue, "Py_BuildValue", python.library);
  lookup(handle, py.PyList_New, "PyList_New", python.library);
  lookup(handle, py.PyList_Append, "PyList_Append", python.library);
  lookup(handle, py.PyTuple_GetItem, "PyTuple_GetItem", python.library);
  lookup(handle, py.PyLong_AsLongLong, "PyLong_AsLongLong", python.library);
  lookup(handle, py.PyUnicode_AsUTF8, "PyUnicode_AsUTF8", python.library);
  lookup(handle, py.Py_DecRef, "Py_DecRef", python.library);
  lookup(handle, py.PyErr_Print, "PyErr_Print", python.library);
  *py.Py_NoSiteFlag = 1;
  *py.Py_DontWriteBytecodeFlag = 1;
  py.Py_InitializeEx(0);  // 0: no signal handlers of Python's (the worker's filter refuses new ones later)

  const std::string source(kTritonRuntimeSource);
  PyObject* code = py.Py_CompileString(source.c_str(), "d2k_triton.py", kPyFileInput);
  if (code == nullptr) {
    py.PyErr_Print();
    fail("d2k's Triton runtime does not compile");
  }
  s.runtime = py.PyImport_ExecCodeModule("d2k_triton", code);
  py.Py_DecRef(code);
  if (s.runtime == nullptr) {
    py.PyErr_Print();
    fail("d2k's Triton runtime cannot be imported");
  }
  Ref start(attr(s.runtime, "start"));
  Ref args(py.Py_BuildValue("(sisss)", "worker", python.capability, python.site.c_str(), python.cache.c_str(), ""));
  Ref result(py.PyObject_CallObject(start.get(), args.get()));
  if (!result) {
    py.PyErr_Print();
    fail("Triton could not be started in the worker (Triton {} from {}; its traceback is in the log)", "3.6.0", python.site);
  }
  s.run = attr(s.runtime, "run");
  s.workspace_size = attr(s.runtime, "workspace_size");
  s.refused = attr(s.runtime, "refused");
  allow_triton_from(python.site + "/triton");
}

TritonLoad load_triton(const WorkerRequest& request) {
  State& s = state();
  if (s.runtime == nullptr || !request.python) fail("the Triton runtime was not started");
  const PythonApi& py = s.api;
  const WirePython& python = *request.python;
  PyObject* tensors = py.PyList_New(0);
  PyObject* outputs = py.PyList_New(0);
  PyObject* scalars = py.PyList_New(0);
  PyObject* modules = py.PyList_New(0);
  auto add_tensor = [&](const WireTensor& t) {
    PyObject* shape = py.PyList_New(0);
    PyObject* strides = py.PyList_New(0);
    for (std::size_t d = 0; d < t.shape.size(); ++d) {
      Ref dim(py.Py_BuildValue("L", static_cast<long long>(t.shape[d])));
      Ref stride(py.Py_BuildValue("L", static_cast<long long>(t.strides[d])));
      py.PyList_Append(shape, dim.get());
      py.PyList_Append(strides, stride.get());
    }
    Ref item(py.Py_BuildValue("(siNN)", t.name.c_str(), static_cast<int>(to_abi(t.dtype)), shape, strides));
    py.PyList_Append(tensors, item.get());
  };
  long long count = 0;
  for (const auto& input : request.inputs) {
    add_tensor(input);
    ++count;
  }
  s.output_inplace.clear();
  for (const auto& output : request.outputs) {
    long long index = -1;
    for (std::size_t i = 0; i < request.inputs.size(); ++i)
      if (output.inplace && request.inputs[i].name == output.name) index = static_cast<long long>(i);
    s.output_inplace.push_back(index >= 0);
    if (index < 0) {
      index = count++;
      add_tensor(output);
    }
    Ref item(py.Py_BuildValue("L", index));
    py.PyList_Append(outputs, item.get());
  }
  for (const auto& scalar : request.scalars) {
    Ref item(py.Py_BuildValue("(si)", scalar.name.c_str(), scalar.is_int ? 1 : 0));
    py.PyList_Append(scalars, item.get());
  }
  for (const auto& module : python.modules) {
    Ref item(py.Py_BuildValue("s", module.c_str()));
    py.PyList_Append(modules, item.get());
  }
  const std::string src_dir = (std::filesystem::path(request.library).parent_path() / "src").string();
  Ref load(attr(s.runtime, "load"));
  Ref args(py.Py_BuildValue("(ssNNNN)", src_dir.c_str(), python.entry.c_str(), modules, tensors, outputs, scalars));
  const Answer answer = answer_of(py.PyObject_CallObject(load.get(), args.get()), "load");
  TritonLoad loaded;
  if (answer.code == 2) loaded.refused = answer.message;
  if (answer.code == 1) loaded.error = answer.message;
  loaded.library.run = &triton_run;
  loaded.library.workspace_size = &triton_workspace_size;
  return loaded;
}

std::optional<std::string> triton_refused_import() {
  State& s = state();
  if (s.refused == nullptr) return std::nullopt;
  Ref result(s.api.PyObject_CallObject(s.refused, nullptr));
  if (!result) {
    s.api.PyErr_Print();
    return std::nullopt;
  }
  const char* text = s.api.PyUnicode_AsUTF8(result.get());
  if (text == nullptr || *text == '\0') return std::nullopt;
  return std::string(text);
}

}  // namespace d2k
