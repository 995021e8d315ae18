// The job's typed configuration: what the job file (common/config/job_file.h)
// reads into, and what every module takes. Plain structs, no YAML: code
// that only reads a configuration does not link the parser.
#ifndef PARAMD_COMMON_CONFIG_JOB_CONFIG_H_
#define PARAMD_COMMON_CONFIG_JOB_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/coordination_config.h"
#include "common/config/schedule_config.h"
#include "common/config/table_config.h"

namespace paramd {

enum class PolicyType { kSync, kAsync, kSsp };

const char* PolicyName(PolicyType type);

// embedding_bag models: how an image becomes row ids of the table;
// embedding_concat models: how many ids (fields) a sample has.
struct FeaturesConfig {
  int fields = 0;                 // embedding_concat: ids per sample.
  int levels = 4;                 // Intensity quantised to this many levels.
  bool pairs = true;              // Also horizontal and vertical pixel pairs.
  std::string combiner = "mean";  // mean or sum of the rows of a sample.
};

// One layer of model.layers in its typed form (docs/job-file.md, "Layers").
enum class LayerKind {
  kDense,
  kConv2d,
  kMaxPool2d,
  kAvgPool2d,
  kRelu,
  kDropout,
  kFlatten,
  kBatchNorm,
  // Dense + ReLU on the dense features an embedding_concat front appends
  // (DLRM's bottom MLP); the fields' rows pass through.
  kBottomDense,
  // Sparse fronts: the first layer only, reading each sample's ids.
  kEmbeddingBag,
  kEmbeddingConcat,
};

// The job file's name of a kind, e.g. "max_pool2d".
const char* LayerKindName(LayerKind kind);

struct LayerConfig {
  LayerKind kind = LayerKind::kDense;
  int out = 0;      // dense: output width; conv2d: output channels.
  int kernel = 0;   // conv2d, pools: the square window's side.
  int stride = 1;   // conv2d (default 1), pools (default: kernel).
  int padding = 0;  // conv2d: zeros on every side.
  double p = 0;     // dropout: the probability an element is zeroed.
  // batch_norm: how far each step moves the running statistics towards
  // the batch's, and the variance's guard.
  double momentum = 0.1;
  double eps = 1e-5;
  // embedding_bag, embedding_concat: the model.embeddings table whose rows
  // the sample's ids select.
  std::string table;
  std::string combiner = "mean";  // embedding_bag: mean or sum of the rows.
  int fields = 0;                 // embedding_concat: ids per sample.
  // embedding_concat: dense (numeric) features per sample, from a click
  // log's columns before its fields (the Criteo layout's 13), placed after
  // the fields' rows in the layer's output.
  int dense = 0;
};

// model.input: one sample's shape. A flat input of W features is
// {W, 1, 1} with `image` false.
struct InputConfig {
  int channels = 0;
  int height = 1;
  int width = 1;
  bool image = false;
};

// model.type.
enum class ModelType { kMlp, kEmbeddingBag, kEmbeddingConcat, kTensors };

// The job file's name of a type, e.g. "embedding_bag".
const char* ModelTypeName(ModelType type);

// One tensor of a model.type tensors job (model.tensors): a framework
// worker's parameter, e.g. PyTorch's "conv1.weight" [32, 1, 3, 3].
struct TensorConfig {
  std::string name;
  std::vector<int64_t> shape;  // Empty: a scalar (one element).
  // Initial values on the servers: uniform in ±bound, or all `value`.
  bool constant = false;
  double bound = 0;
  double value = 0;
  // kind: statistic: not trained but kept (a module's buffer, batch norm's
  // running mean): each push carries the change the worker made to it, and
  // the servers add those changes (their mean under sync) instead of
  // applying the optimizer (TensorKind::kStatistic).
  bool statistic = false;
};

struct ModelConfig {
  // "mlp": layers only. "embedding_bag": each sample's hashed features
  // (`features`) select rows of embeddings[0], combined into a vector of
  // its dim, which feeds the MLP of `layers` (layers[0] = dim).
  // "embedding_concat": each sample carries features.fields ids (one per
  // categorical field); their rows, concatenated, feed the MLP (layers[0]
  // = fields × dim). Its samples come from tools/rows_bench's synthetic
  // click log. "tensors": the model is a framework's (python/paramd, e.g.
  // a PyTorch nn.Module); the job lists its tensors (`tensors`, from
  // model.tensors or model.tensors_file), or its workers declare them
  // (tensors_declared), and paramd-worker refuses it.
  ModelType type = ModelType::kMlp;
  // The shorthand: widths, input first, classes last; dense layers with a
  // ReLU between each two. Empty when the job gives a typed graph.
  std::vector<int> layers;
  // The typed graph (model.input and model.layers as a list of layers);
  // empty for the shorthand. common/config/layer_shapes.h infers shapes.
  InputConfig input;
  std::vector<LayerConfig> graph;
  std::vector<EmbeddingTableConfig> embeddings;
  FeaturesConfig features;
  std::vector<TensorConfig> tensors;  // type tensors only.
  // model.tensors_file, absolute; empty when the list stands inline.
  std::string tensors_file;
  // Type tensors with neither model.tensors nor model.tensors_file: the
  // list comes from the workers' declaration (JobConfig::declaration;
  // `tensors` is empty until one is taken).
  bool tensors_declared = false;
  // model.initial_values: rank0 (type tensors): the servers' first values
  // are rank 0's model's (paramd.torch sends them) instead of drawn from
  // each tensor's init; pulls wait for them.
  bool initial_values_from_rank0 = false;
};

// Random changes to each training image, a pure function of (job seed,
// rank, clock, sample): a retried or restored step sees the same batch.
// Test images are never changed.
struct AugmentConfig {
  // > 0: the image is padded with zeros by this many pixels on each side
  // and a crop of its own size taken at a random offset.
  int crop_padding = 0;
  bool flip = false;  // Mirrored left to right with probability 1/2.
  bool enabled() const { return crop_padding > 0 || flip; }
};

// data.format: what the data files hold.
enum class DataFormat {
  kIdx,     // IDX images and labels (Fashion-MNIST's layout).
  kClicks,  // Click logs: a text line per sample, label then field tokens.
};

struct DataConfig {
  DataFormat format = DataFormat::kIdx;
  // Absolute paths after loading (relative ones resolve against the job
  // file's folder).
  std::string train_images;
  std::string train_labels;
  std::string test_images;
  std::string test_labels;
  // format clicks: the training and (optional, empty: none) test logs.
  std::string train_file;
  std::string test_file;
  int64_t train_limit = 0;  // Use only the first N training samples; 0: all.
  int64_t test_limit = 0;   // Use only the first N test samples; 0: all.
  AugmentConfig augment;
};

struct TrainingConfig {
  int epochs = 0;
  int batch_size = 0;
  bool shuffle = true;
};

struct OptimizerConfig {
  std::string type = "sgd";  // sgd, adam, adamw, rmsprop or adagrad
  double learning_rate = 0;
  double momentum = 0;      // sgd, rmsprop
  double weight_decay = 0;  // L2 in the gradient; decoupled for adamw
  bool nesterov = false;    // sgd
  double beta1 = 0.9;       // adam, adamw
  double beta2 = 0.999;     // adam, adamw
  double alpha = 0.99;      // rmsprop: smoothing of the squared gradient
  double eps = 0;           // adam, adamw, rmsprop 1e-8; adagrad 1e-10
  ScheduleConfig schedule;
  // > 0: a push whose gradient's L2 norm (over the chunks and rows one
  // shard receives) exceeds this is scaled down to it, on the server.
  double clip_norm = 0;
};

// How async and ssp weigh a push by its staleness tau: the versions the
// shard moved from the one the worker pulled to the one the push makes
// (1 for a fresh gradient).
enum class StalenessScaling {
  kNone,     // Every push's step as the optimizer makes it.
  kInverse,  // The step divided by tau (staleness-aware async SGD).
};

const char* StalenessScalingName(StalenessScaling scaling);

struct PolicyConfig {
  PolicyType type = PolicyType::kSync;
  // ssp only: how many clocks a worker may run ahead of the slowest live
  // worker.
  int staleness = 0;
  // async and ssp only.
  StalenessScaling staleness_scaling = StalenessScaling::kNone;
  // sync only: a round closes once at most this many live workers are
  // missing from it; their late pushes are acknowledged and dropped.
  int backup_workers = 0;
};

struct LivenessConfig {
  // A worker not heard from for this long is dropped from the live set.
  double lease_seconds = 10;
  // How often workers send heartbeats.
  double heartbeat_seconds = 1;
  // A pull (a sync round, an SSP bound) waiting longer than this is a
  // stall: the server logs the ranks it waits for and what each last did,
  // again after 2x, 4x, ... this long, and shows it in status and metrics.
  double stall_warn_seconds = 30;
  // A worker retries a call a server did not answer (UNAVAILABLE,
  // DEADLINE_EXCEEDED) with backoff for this long, then gives up naming
  // the shard.
  double give_up_seconds = 120;
  // A server pings a connection (HTTP/2 PING) every this long and closes
  // it when a ping is not answered within this long again: the calls of a
  // client whose host vanished without closing its connections (power
  // lost, network cut) end, and what they hold is released.
  double keepalive_seconds = 30;
};

// Each shard's checkpoints (server/checkpoint/checkpointer.h). Off without a
// dir.
struct CheckpointConfig {
  // False: no checkpoints at all, not even paramctl run's own.
  bool enabled = true;
  // Absolute after loading (relative: against the job file's folder).
  // Empty: none, except that paramctl run checkpoints each shard into its
  // run folder (so that it can restart a dead server) unless !enabled.
  std::string dir;
  // A checkpoint every this many versions (and on SIGTERM).
  int64_t every_steps = 100;
  // Checkpoints kept per shard (full ones, and as many deltas).
  int keep = 3;
  // Every this many checkpoints one is full; the others hold only what
  // changed since it (the dense part whole, and the embedding rows pushed
  // or dropped since). 1: every checkpoint is full.
  int64_t full_every = 1;
};

// Each shard kept on a second server as well (docs/operations.md,
// "Replicas"): its backup holds the primary's state after every step and
// serves the shard when the primary dies.
struct ReplicationConfig {
  int factor = 1;  // 1: no replicas; 2: a backup for every shard.
  // With factor 2: where each shard's backup listens, one "host:port" per
  // shard, in shard order.
  std::vector<std::string> backups;
  bool enabled() const { return factor > 1; }
};

// What `paramctl run` does when a process of the job dies.
struct RestartConfig {
  int max = 3;  // Restarts per process; 0: a death stops the job.
  double backoff_seconds = 1;  // Wait before a restart, doubled each time.
};

// Bounds on what one server holds, so that overload is refused
// (RESOURCE_EXHAUSTED) rather than grown into.
struct LimitsConfig {
  // Push and pull calls one rank may have inside one shard at a time (a
  // worker needs two: a push and the next pull).
  int max_inflight_per_worker = 4;
  // Memory gRPC may use for one server's connections: messages received
  // and not yet handled. 0: 4 x workers x the largest message, at least
  // 256 MiB.
  int64_t transport_memory_mb = 0;
  // The HTTP/2 window of each step's stream, fixed, in KiB: the servers
  // stop gRPC's bandwidth-delay probing and announce this window, and the
  // workers start their streams with it. 0: gRPC's adaptive windows.
  // Measured faster across 1 Gbit/s links, slower across faster ones
  // (docs/job-file.md has the figures).
  int64_t stream_window_kb = 0;
  // The windows stream_window_kb may name (besides 0).
  static constexpr int64_t kMinStreamWindowKb = 64;
  static constexpr int64_t kMaxStreamWindowKb = int64_t{1} << 20;
  static bool ValidStreamWindow(int64_t kb) {
    return kb == 0 || (kb >= kMinStreamWindowKb && kb <= kMaxStreamWindowKb);
  }
};

// What travels on the wire (`compression`).
struct CompressionConfig {
  // "none": float32 gradients; "fp16": IEEE half gradients (common/base/half.h;
  // beyond ±65504 saturates), widened to float32 by the servers, which keep
  // float32 parameters and optimizer state. "topk": per chunk, the `ratio`
  // share of entries of largest magnitude as (index, value) pairs
  // (worker/topk.h); with `error_feedback` the rest is kept on the worker
  // and added to the next gradient.
  std::string type = "none";
  double ratio = 0.01;
  bool error_feedback = true;
  // topk: momentum correction (0: off). Each worker keeps SGD's momentum
  // itself, v = momentum * v + g, selects from v + residual, and restarts
  // v at the entries it sent; the servers then run plain SGD.
  double momentum = 0;
  // What parameters are pulled as: "float32" or "fp16" (IEEE half; the
  // servers keep float32 and convert each version once).
  std::string pull = "float32";
  bool fp16() const { return type == "fp16"; }
  bool pull_fp16() const { return pull == "fp16"; }
  bool topk() const { return type == "topk"; }
};

// Prometheus metrics (`metrics`): each process serves GET /metrics over
// HTTP. Server shard K listens on port + K, worker rank R on port +
// num_servers + R, so that a whole job fits on one host; a process's
// --metrics_listen flag overrides both.
// A step timeline (the `tracing` section; off without a dir): every worker
// and server records its events of clocks [from_step, from_step + steps)
// into dir (common/trace/trace_events.h); paramctl merges them into one
// Chrome trace-event file.
struct TracingConfig {
  // More steps than a timeline is read for, and the memory they'd take.
  static constexpr int64_t kMaxSteps = 100000;
  std::string dir;  // Absolute after loading; empty: off.
  int64_t from_step = 0;
  int64_t steps = 4;
  bool on() const { return !dir.empty(); }
};

struct MetricsConfig {
  int port = 0;                  // 0: off.
  std::string bind = "0.0.0.0";  // The interface to listen on.
};

// Who may talk to the job's servers. Paths are absolute after loading
// (relative ones resolve against the job file's folder); the files are read
// when a process starts (common/rpc/credentials.h). Empty: off.
struct SecurityConfig {
  // A file holding the job token. Servers answer UNAUTHENTICATED to any
  // call without it ("authorization: Bearer <token>" metadata).
  std::string token_file;
  // TLS: the servers' certificate chain and private key (PEM). With a
  // certificate every channel is TLS.
  std::string tls_cert;
  std::string tls_key;
  // The CA bundle clients check the servers' certificates against (and
  // servers check clients' with mutual_tls); default: tls_cert, for a
  // self-signed one.
  std::string tls_ca;
  // Servers require a client certificate signed by tls_ca; clients present
  // tls_client_cert/tls_client_key (default: tls_cert/tls_key).
  bool mutual_tls = false;
  std::string tls_client_cert;
  std::string tls_client_key;
  // The name clients expect in the servers' certificate; default: the host
  // of each server's address.
  std::string tls_server_name;

  bool tls() const { return !tls_cert.empty(); }
};

// The servers' watch for diverging workers (the `guard` section; off
// without it): a push whose batch loss is not finite, or above loss_spike
// times the rank's running mean of its losses, is a divergence.
enum class OnDiverge {
  kWarn,  // Logged, counted and shown; the push is applied.
  kStop,  // As kWarn, and every later push of the job is refused.
  // As kWarn, but the push is acknowledged and not applied: under sync
  // the round's mean is over the other ranks' gradients (a round with
  // none moves the version on without a step).
  kSkipPush,
};

struct GuardConfig {
  bool enabled = false;
  double loss_spike = 10;
  int warmup_pushes = 20;  // Pushes of a rank before its mean counts.
  OnDiverge on_diverge = OnDiverge::kWarn;
};

// Testing aids, documented as such: they make a run slower on purpose.
struct TestingConfig {
  int slow_rank = -1;  // This rank sleeps slow_step_ms per step.
  int slow_step_ms = 0;
  // Servers: after handling a push or pull, hold the reply a random 0 to
  // delay_reply_ms, and drop it (answer UNAVAILABLE although the request
  // was handled) with this probability, so that clients retry.
  double drop_reply_probability = 0;
  int delay_reply_ms = 0;
};

struct WorkerConfig {
  std::string device = "auto";  // auto, cpu or cuda
  bool allow_tf32 = false;      // cuda: let cuBLAS use TF32 tensor cores
  int threads = 1;              // Compute threads per worker process.
  // Overlap each step's push with its backward pass and the next step's
  // forward pass with the pull (worker/parameter_client.h StepExchange).
  bool overlap = false;
  // OpenBLAS kernel: "auto", "library" or an OpenBLAS core name
  // (worker/model/blas.h).
  std::string blas_core = "auto";
  // worker.shared_memory auto: a step's chunk bytes go through shared
  // memory to a server on the worker's own host (common/wire/
  // shared_segment.h), by the socket to one elsewhere; off: always the
  // socket.
  bool shared_memory = true;
  // > 0: a step's push to a shard goes by the socket in messages of about
  // this many bytes of chunks, each answered as soon as its sync round
  // commits, while the later ones are still on the wire (a full-duplex
  // step, PushRequest.slices), where the servers take slices
  // (ServersTakeSlices). 0: the push in messages of up to 1 MiB, answered
  // once whole.
  int64_t slice_bytes = 32768;
  // The worker program `paramctl run` starts instead of paramd-worker
  // (e.g. {"/usr/bin/python3", "train.py"} for paramd.torch), in the job
  // file's folder, with the rank, job, servers and launch in PARAMD_RANK,
  // PARAMD_JOB, PARAMD_SERVERS and PARAMD_LAUNCH. Empty: paramd-worker.
  std::vector<std::string> command;
};

struct JobConfig {
  std::string path;  // The file this was read from.
  std::string job_id;
  uint64_t seed = 1;
  std::vector<std::string> servers;  // "host:port", one per shard.
  // cluster.servers: {slurm: N}: the N addresses come from the Slurm job the
  // process runs in (common/launch/slurm.h); until resolved, `servers` holds N
  // empty strings.
  bool servers_from_slurm = false;
  // cluster.servers: {etcd: N}: the N servers register in coordination.etcd
  // and are found there (common/coord/rpc/member_registration.h); until
  // resolved, `servers` holds N "0.0.0.0:0" (each listens on every
  // interface at a port of its choosing unless --listen says otherwise).
  bool servers_from_etcd = false;
  int slurm_port = 0;  // Port of server 0 (K: + K); 0: from the job id.
  int num_workers = 0;
  ModelConfig model;
  DataConfig data;
  TrainingConfig training;
  OptimizerConfig optimizer;
  // A model.type tensors job without an optimizer section: the workers
  // declare it (JobConfig::declaration); `optimizer` holds the defaults
  // until one is taken.
  bool optimizer_declared = false;
  // The workers' declaration this config took (WithDeclaredModel in
  // common/config/job_file.h); empty when none.
  std::string declaration;
  PolicyConfig policy;
  GuardConfig guard;
  LivenessConfig liveness;
  LimitsConfig limits;
  SecurityConfig security;
  CheckpointConfig checkpoint;
  RestartConfig restart;
  ReplicationConfig replication;
  CoordinationConfig coordination;
  MetricsConfig metrics;
  TracingConfig tracing;
  CompressionConfig compression;
  int64_t chunk_bytes = 1 << 20;
  WorkerConfig worker;
  TestingConfig testing;

  int num_shards() const { return static_cast<int>(servers.size()); }
  // Whether the model (its tensors, or its optimizer) is still to come
  // from the workers' declaration: servers wait for one before serving.
  bool awaits_declaration() const {
    return (model.tensors_declared || optimizer_declared) &&
           declaration.empty();
  }
};

// Whether the servers answer a StepStream step slice by slice
// (PushRequest.slices): policy sync without backup workers, no
// replication, no gradient guard or clipping, no embedding tables,
// parameters pulled as float32.
bool ServersTakeSlices(const JobConfig& config);

// Splits "host:port"; the port must be in [0, 65535].
absl::Status ParseHostPort(const std::string& address, std::string* host,
                           int* port);

}  // namespace paramd

#endif  // PARAMD_COMMON_CONFIG_JOB_CONFIG_H_
