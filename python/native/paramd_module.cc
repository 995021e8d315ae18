// paramd._native: the Python face of FrameworkWorker
// (python/native/framework_worker.h). Buffers cross as NumPy arrays that
// must be float32, C-contiguous and (for what is written) writeable:
// torch's tensor.numpy() shares the tensor's memory, so nothing is copied.
// Every call that may wait on a server releases the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/base/process_setup.h"
#include "python/native/framework_worker.h"
#include "worker/test_tally.h"

namespace py = pybind11;

namespace paramd {
namespace {

// absl::Status → a Python exception: ValueError for bad arguments,
// RuntimeError ("CODE: message") for the rest.
void Raise(const absl::Status& s) {
  if (s.ok()) return;
  if (absl::IsInvalidArgument(s))
    throw py::value_error(std::string(s.message()));
  throw std::runtime_error(
      absl::StrCat(absl::StatusCodeToString(s.code()), ": ", s.message()));
}

template <typename T>
T Value(absl::StatusOr<T> v) {
  Raise(v.status());
  return *std::move(v);
}

// `array` as a span of floats, refused unless float32 and C-contiguous
// (and writeable when `writable`), naming `what`.
absl::Span<float> Floats(const py::array& array, const char* what,
                         bool writable) {
  if (!py::dtype::of<float>().is(array.dtype())) {
    throw py::value_error(absl::StrCat(what, ": expected float32, got ",
                                       std::string(py::str(array.dtype()))));
  }
  if (!(array.flags() & py::array::c_style)) {
    throw py::value_error(absl::StrCat(what, ": must be C-contiguous"));
  }
  if (writable && !array.writeable()) {
    throw py::value_error(absl::StrCat(what, ": must be writeable"));
  }
  return absl::Span<float>(static_cast<float*>(const_cast<void*>(array.data())),
                           static_cast<size_t>(array.size()));
}

absl::Span<const uint64_t> Ids(const py::array& array) {
  if (!py::dtype::of<uint64_t>().is(array.dtype())) {
    throw py::value_error(absl::StrCat("ids: expected uint64, got ",
                                       std::string(py::str(array.dtype()))));
  }
  if (!(array.flags() & py::array::c_style)) {
    throw py::value_error("ids: must be C-contiguous");
  }
  return absl::Span<const uint64_t>(static_cast<const uint64_t*>(array.data()),
                                    static_cast<size_t>(array.size()));
}

void PullRows(FrameworkWorker& w, uint32_t table, const py::array& ids,
              const py::array& out) {
  const absl::Span<const uint64_t> i = Ids(ids);
  const absl::Span<float> o = Floats(out, "out", true);
  py::gil_scoped_release release;
  Raise(w.PullRows(table, i, o));
}

void SetRowGradients(FrameworkWorker& w, uint32_t table, const py::array& ids,
                     const py::array& grads) {
  Raise(w.SetRowGradients(table, Ids(ids), Floats(grads, "grads", false)));
}

py::list Tables(const FrameworkWorker& w) {
  py::list out;
  for (const EmbeddingTableConfig& t : w.config().model.embeddings) {
    out.append(py::make_tuple(t.name, t.rows, t.dim));
  }
  return out;
}

std::unique_ptr<FrameworkWorker> MakeWorker(const std::string& job, int rank,
                                            std::vector<std::string> servers,
                                            const std::string& launch,
                                            std::vector<std::string> backups) {
  FrameworkWorkerOptions o;
  o.job = job;
  o.rank = rank;
  o.servers = std::move(servers);
  o.backups = std::move(backups);
  o.launch = launch;
  return Value(FrameworkWorker::Create(o));
}

py::list Tensors(const FrameworkWorker& w) {
  py::list out;
  for (const TensorSpec& t : w.spec().tensors) {
    out.append(py::make_tuple(t.name, py::tuple(py::cast(t.shape))));
  }
  return out;
}

void CheckTensors(const FrameworkWorker& w, const py::list& tensors) {
  std::vector<DeclaredTensor> declared;
  // (name, shape) or (name, shape, kind), kind "trainable" or "statistic".
  for (const py::handle& item : tensors) {
    auto entry = item.cast<py::tuple>();
    if (entry.size() != 2 && entry.size() != 3) {
      throw py::value_error(
          "check_tensors: expected (name, shape[, kind]) per tensor");
    }
    DeclaredTensor t{entry[0].cast<std::string>(),
                     entry[1].cast<std::vector<int64_t>>()};
    if (entry.size() == 3) {
      const std::string kind = entry[2].cast<std::string>();
      if (kind != "trainable" && kind != "statistic") {
        throw py::value_error("check_tensors: kind '" + kind +
                              "' (expected: trainable or statistic)");
      }
      t.statistic = kind == "statistic";
    }
    declared.push_back(std::move(t));
  }
  Raise(w.CheckTensors(declared));
}

uint64_t Start(FrameworkWorker& w, const py::array& params) {
  const absl::Span<float> p = Floats(params, "params", true);
  py::gil_scoped_release release;
  return Value(w.Start(p));
}

void SendInitialValues(FrameworkWorker& w, const py::array& params) {
  const absl::Span<float> p = Floats(params, "params", false);
  py::gil_scoped_release release;
  Raise(w.SendInitialValues(p));
}

uint64_t Step(FrameworkWorker& w, const py::array& grads, float loss,
              const py::array& params) {
  const absl::Span<float> g = Floats(grads, "grads", false);
  const absl::Span<float> p = Floats(params, "params", true);
  py::gil_scoped_release release;
  return Value(w.Step(g, loss, p));
}

void ReportEpoch(FrameworkWorker& w, int epoch, double loss_sum,
                 uint64_t samples, double seconds, uint64_t correct,
                 uint64_t total, const py::object& scores,
                 const py::object& labels) {
  EpochReport r;
  r.epoch = epoch;
  r.train_loss_sum = loss_sum;
  r.train_samples = samples;
  r.train_seconds = seconds;
  r.test_correct = correct;
  r.test_total = total;
  if (scores.is_none() != labels.is_none()) {
    throw py::value_error("report_epoch: pass scores= and labels= together");
  }
  if (!scores.is_none()) {
    // A binary classifier's test share: its log loss and scores by bin
    // (worker/test_tally.h), the correct count and total from them.
    using Doubles =
        py::array_t<double, py::array::c_style | py::array::forcecast>;
    using Labels =
        py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
    const Doubles p = Doubles::ensure(scores);
    const Labels y = Labels::ensure(labels);
    if (!p || !y || p.ndim() != 1 || y.ndim() != 1) {
      throw py::value_error(
          "report_epoch: scores and labels must be 1-D arrays of numbers");
    }
    TestTally tally(2);
    Raise(tally.AddProbabilities(
        absl::MakeConstSpan(p.data(), static_cast<size_t>(p.size())),
        absl::MakeConstSpan(y.data(), static_cast<size_t>(y.size()))));
    tally.Fill(static_cast<uint64_t>(p.size()), &r);
  }
  py::gil_scoped_release release;
  Raise(w.ReportEpoch(r));
}

// The job file's settings a framework worker reads, as properties.
void DefineJobProperties(py::class_<FrameworkWorker>* worker) {
  (*worker)
      .def_property_readonly(
          "job_id", [](const FrameworkWorker& w) { return w.config().job_id; })
      .def_property_readonly(
          "policy",
          [](const FrameworkWorker& w) {
            return std::string(PolicyName(w.config().policy.type));
          })
      .def_property_readonly(
          "workers",
          [](const FrameworkWorker& w) { return w.config().num_workers; })
      .def_property_readonly(
          "servers",
          [](const FrameworkWorker& w) { return w.config().num_shards(); })
      .def_property_readonly("batch_size",
                             [](const FrameworkWorker& w) {
                               return w.config().training.batch_size;
                             })
      .def_property_readonly(
          "epochs",
          [](const FrameworkWorker& w) { return w.config().training.epochs; })
      .def_property_readonly(
          "seed", [](const FrameworkWorker& w) { return w.config().seed; })
      .def_property_readonly("data",
                             [](const FrameworkWorker& w) {
                               const DataConfig& d = w.config().data;
                               py::dict out;
                               out["train_images"] = d.train_images;
                               out["train_labels"] = d.train_labels;
                               out["test_images"] = d.test_images;
                               out["test_labels"] = d.test_labels;
                               out["train_limit"] = d.train_limit;
                               out["test_limit"] = d.test_limit;
                               out["shuffle"] = w.config().training.shuffle;
                               return out;
                             })
      .def_property_readonly(
          "initial_values_from_rank0",
          [](const FrameworkWorker& w) {
            return w.config().model.initial_values_from_rank0;
          })
      // The job file leaves the tensors, or the optimizer, to the workers.
      .def_property_readonly("tensors_declared",
                             [](const FrameworkWorker& w) {
                               return w.config().model.tensors_declared;
                             })
      .def_property_readonly("optimizer_declared",
                             [](const FrameworkWorker& w) {
                               return w.config().optimizer_declared;
                             });
}

void Declare(FrameworkWorker& w, const std::string& declaration) {
  Raise(w.Declare(declaration));
}

}  // namespace
}  // namespace paramd

PYBIND11_MODULE(_native, m) {
  using paramd::FrameworkWorker;
  m.doc() = "paramd's client for framework workers (see paramd.torch)";
  // Before the first channel: this process's gRPC polls as paramd's own
  // programs do (kept when GRPC_POLL_STRATEGY is set).
  paramd::ChooseGrpcPoller();
  m.def(
      "init_logging",
      [](const std::string& name, const std::string& level) {
        paramd::Raise(paramd::InitLogging(name, level));
      },
      py::arg("name"), py::arg("level") = "info");
  py::class_<FrameworkWorker> worker(m, "Worker");
  worker
      .def(py::init(&paramd::MakeWorker), py::arg("job"), py::arg("rank"),
           py::arg("servers") = std::vector<std::string>(),
           py::arg("launch") = "",
           py::arg("backups") = std::vector<std::string>())
      .def_property_readonly("tensors", &paramd::Tensors)
      .def_property_readonly(
          "total", [](const FrameworkWorker& w) { return w.layout().total; })
      .def_property_readonly("rank", &FrameworkWorker::rank)
      .def_property_readonly("clock", &FrameworkWorker::clock);
  paramd::DefineJobProperties(&worker);
  worker.def("check_tensors", &paramd::CheckTensors, py::arg("tensors"))
      .def("declare", &paramd::Declare, py::arg("declaration"))
      .def_property_readonly("tables", &paramd::Tables)
      .def("pull_rows", &paramd::PullRows, py::arg("table"), py::arg("ids"),
           py::arg("out"))
      .def("set_row_gradients", &paramd::SetRowGradients, py::arg("table"),
           py::arg("ids"), py::arg("grads"))
      .def("start", &paramd::Start, py::arg("params"))
      .def("send_initial_values", &paramd::SendInitialValues, py::arg("params"))
      .def("step", &paramd::Step, py::arg("grads"), py::arg("loss"),
           py::arg("params"))
      .def("report_epoch", &paramd::ReportEpoch, py::arg("epoch"),
           py::arg("loss_sum"), py::arg("samples"), py::arg("seconds"),
           py::arg("correct"), py::arg("total"), py::arg("scores") = py::none(),
           py::arg("labels") = py::none())
      .def("finish", &FrameworkWorker::Finish,
           py::call_guard<py::gil_scoped_release>());
}
