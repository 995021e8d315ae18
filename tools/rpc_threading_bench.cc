// rpc_threading_bench: what gRPC's threading costs one small round trip on
// this machine, before paramd's own work: an echo over one long-lived
// bidi stream (as a StepStream is), between this process and a server
// process, in four forms:
//
//   server  callback: gRPC's callback API;
//           cq-thread: the async API, one thread polling its own
//           completion queue and reacting where it woke (as paramd-server
//           serves every method);
//           cq-2threads: two such threads, each with its own queue and
//           its own calls (the call lands on one, the other waits).
//   client  callback: a ClientBidiReactor whose replies a waiting thread
//           is handed (as the worker's StepStream is);
//           cq-caller: the async API, the calling thread polling its
//           own completion queue (no other thread involved).
//
// For each form: round trips' p50 and mean, and the context switches per
// round trip in the client and in the server process (all their threads,
// /proc/PID/task/*/status). Forms alternate round by round, so a drift of
// the machine's speed reaches them alike.
//
//   bazel run //tools:rpc_threading_bench -- [--bytes 4096] [--trips 5000]
//       [--rounds 3] [--poll_strategy epoll1|poll]
//
// --poll_strategy: gRPC's poller in the server processes
// (GRPC_POLL_STRATEGY; epoll1, the default, is one epoll set and one
// active poller for the whole process; poll polls each queue's own
// calls).
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/base/flags.h"
#include "tools/bench/proc_status.h"

namespace paramd {
namespace {

constexpr char kMethod[] = "/paramd.bench.Echo/Echo";

// --- Servers (each in a process of its own) ---

class EchoReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  EchoReactor() { StartRead(&message_); }
  void OnReadDone(bool ok) override {
    if (!ok) return Finish(grpc::Status::OK);
    StartWrite(&message_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) return Finish(grpc::Status::OK);
    StartRead(&message_);
  }
  void OnDone() override { delete this; }

 private:
  grpc::ByteBuffer message_;
};

class EchoService final : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext*) override {
    return new EchoReactor;
  }
};

// One call of the async server, driven by the thread that polls the queue.
struct AsyncCall {
  enum class State { kNew, kReading, kWriting, kFinishing };
  grpc::GenericServerContext context;
  grpc::GenericServerAsyncReaderWriter stream{&context};
  grpc::ByteBuffer message;
  State state = State::kNew;
};

void ServeCallback(grpc::ServerBuilder* builder) {
  static EchoService service;
  builder->RegisterCallbackGenericService(&service);
}

// Serves on the calling thread until the queue shuts down.
void ServeAsync(grpc::AsyncGenericService* service,
                grpc::ServerCompletionQueue* cq) {
  auto request = [&] {
    auto* call = new AsyncCall;
    service->RequestCall(&call->context, &call->stream, cq, cq, call);
  };
  request();
  void* tag;
  bool ok;
  while (cq->Next(&tag, &ok)) {
    auto* call = static_cast<AsyncCall*>(tag);
    switch (call->state) {
      case AsyncCall::State::kNew:
        if (!ok) {
          delete call;
          break;
        }
        request();
        call->state = AsyncCall::State::kReading;
        call->stream.Read(&call->message, call);
        break;
      case AsyncCall::State::kReading:
      case AsyncCall::State::kWriting:
        if (!ok) {
          call->state = AsyncCall::State::kFinishing;
          call->stream.Finish(grpc::Status::OK, call);
        } else if (call->state == AsyncCall::State::kReading) {
          call->state = AsyncCall::State::kWriting;
          call->stream.Write(call->message, call);
        } else {
          call->state = AsyncCall::State::kReading;
          call->stream.Read(&call->message, call);
        }
        break;
      case AsyncCall::State::kFinishing:
        delete call;
        break;
    }
  }
}

struct ServerProcess {
  pid_t pid = -1;
  int port = 0;
};

enum class ServerKind { kCallback, kQueue, kTwoQueues };

// Forks a server of the given kind on a port of its choosing, its gRPC
// polling with `poll_strategy` (empty: gRPC's default); it lives until it
// is killed, or this process dies.
ServerProcess StartServer(ServerKind kind, const std::string& poll_strategy) {
  int port_pipe[2];
  if (pipe(port_pipe) != 0) return {};
  const pid_t pid = fork();
  if (pid < 0) return {};
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(port_pipe[0]);
    // Read when gRPC starts, which it has not in this process.
    if (!poll_strategy.empty()) {
      setenv("GRPC_POLL_STRATEGY", poll_strategy.c_str(), 1);
    }
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    grpc::AsyncGenericService async_service;
    std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs;
    if (kind == ServerKind::kCallback) {
      ServeCallback(&builder);
    } else {
      builder.RegisterAsyncGenericService(&async_service);
      cqs.push_back(builder.AddCompletionQueue());
      if (kind == ServerKind::kTwoQueues) {
        cqs.push_back(builder.AddCompletionQueue());
      }
    }
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (server == nullptr) _exit(1);
    if (write(port_pipe[1], &port, sizeof(port)) != sizeof(port)) _exit(1);
    std::vector<std::thread> pollers;
    for (auto& cq : cqs) {
      pollers.emplace_back(
          [&async_service, q = cq.get()] { ServeAsync(&async_service, q); });
    }
    server->Wait();  // Until SIGKILL.
    _exit(0);
  }
  close(port_pipe[1]);
  ServerProcess started{pid, 0};
  if (read(port_pipe[0], &started.port, sizeof(started.port)) !=
      sizeof(started.port)) {
    started.pid = -1;
  }
  close(port_pipe[0]);
  return started;
}

// --- Clients ---

class Client {
 public:
  virtual ~Client() = default;
  // Sends `message` and waits for its echo; false when the call failed.
  virtual bool RoundTrip(const grpc::ByteBuffer& message) = 0;
};

// A reactor on gRPC's threads hands each reply to the waiting caller.
class CallbackClient final
    : public Client,
      public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit CallbackClient(grpc::GenericStub* stub) {
    stub->PrepareBidiStreamingCall(&context_, kMethod, grpc::StubOptions(),
                                   this);
    AddHold();
    StartCall();
  }
  ~CallbackClient() override {
    context_.TryCancel();
    RemoveHold();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
  }
  bool RoundTrip(const grpc::ByteBuffer& message) override {
    {
      absl::MutexLock lock(&mu_);
      written_ = read_ = false;
    }
    out_ = message;
    StartWrite(&out_);
    StartRead(&in_);
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](CallbackClient* c) { return c->written_ && c->read_; }, this));
    return ok_;
  }

 private:
  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    ok_ = ok_ && ok;
    written_ = true;
  }
  void OnReadDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    ok_ = ok_ && ok;
    read_ = true;
  }
  void OnDone(const grpc::Status&) override {
    absl::MutexLock lock(&mu_);
    done_ = true;
  }

  grpc::ClientContext context_;
  grpc::ByteBuffer out_, in_;
  absl::Mutex mu_;
  bool written_ ABSL_GUARDED_BY(mu_) = false;
  bool read_ ABSL_GUARDED_BY(mu_) = false;
  bool ok_ ABSL_GUARDED_BY(mu_) = true;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

// The caller polls the call's own completion queue: the reply is read on
// the thread that waits for it.
class QueueClient final : public Client {
 public:
  explicit QueueClient(grpc::GenericStub* stub)
      : call_(stub->PrepareCall(&context_, kMethod, &cq_)) {
    call_->StartCall(Tag(kStart));
    ok_ = Await(1);
  }
  ~QueueClient() override {
    context_.TryCancel();
    grpc::Status status;
    call_->Finish(&status, Tag(kFinish));
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok) && tag != Tag(kFinish)) {
    }
    cq_.Shutdown();
    while (cq_.Next(&tag, &ok)) {
    }
  }
  bool RoundTrip(const grpc::ByteBuffer& message) override {
    call_->Write(message, Tag(kWrite));
    call_->Read(&in_, Tag(kRead));
    ok_ = ok_ && Await(2);
    return ok_;
  }

 private:
  enum { kStart = 1, kWrite, kRead, kFinish };
  static void* Tag(intptr_t t) { return reinterpret_cast<void*>(t); }
  // Takes `n` events off the queue; false if any failed.
  bool Await(int n) {
    bool all = true;
    for (int i = 0; i < n; ++i) {
      void* tag;
      bool ok;
      if (!cq_.Next(&tag, &ok)) return false;
      all = all && ok;
    }
    return all;
  }

  grpc::ClientContext context_;
  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  grpc::ByteBuffer in_;
  bool ok_ = true;
};

grpc::ByteBuffer Payload(int bytes) {
  std::string data(bytes, 'p');
  grpc::Slice slice(data);
  return grpc::ByteBuffer(&slice, 1);
}

struct Figures {
  double p50_us = 0, mean_us = 0;
  double client_switches = 0, server_switches = 0;  // Per round trip.
};

bool Measure(Client* client, const grpc::ByteBuffer& message, int trips,
             pid_t server, Figures* out) {
  for (int i = 0; i < 200; ++i) {
    if (!client->RoundTrip(message)) return false;
  }
  std::vector<double> us(trips);
  const int64_t client_before = ContextSwitches(0);
  const int64_t server_before = ContextSwitches(server);
  for (int i = 0; i < trips; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (!client->RoundTrip(message)) return false;
    us[i] = std::chrono::duration<double, std::micro>(
                std::chrono::steady_clock::now() - start)
                .count();
  }
  out->client_switches =
      static_cast<double>(ContextSwitches(0) - client_before) / trips;
  out->server_switches =
      static_cast<double>(ContextSwitches(server) - server_before) / trips;
  double sum = 0;
  for (double u : us) sum += u;
  out->mean_us = sum / trips;
  std::nth_element(us.begin(), us.begin() + trips / 2, us.end());
  out->p50_us = us[trips / 2];
  return true;
}

// Runs one client form in a process of its own (so that no thread of
// another form's API polls for it) against `server`.
bool MeasureInChild(const ServerProcess& server, bool queue,
                    const grpc::ByteBuffer& message, int trips, Figures* out) {
  int result[2];
  if (pipe(result) != 0) return false;
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    close(result[0]);
    auto channel =
        grpc::CreateChannel("127.0.0.1:" + std::to_string(server.port),
                            grpc::InsecureChannelCredentials());
    grpc::GenericStub stub(channel);
    Figures f;
    bool ok;
    {
      std::unique_ptr<Client> client;
      if (queue) {
        client = std::make_unique<QueueClient>(&stub);
      } else {
        client = std::make_unique<CallbackClient>(&stub);
      }
      ok = Measure(client.get(), message, trips, server.pid, &f);
    }
    _exit(ok && write(result[1], &f, sizeof(f)) == sizeof(f) ? 0 : 1);
  }
  close(result[1]);
  const bool got = read(result[0], out, sizeof(*out)) == sizeof(*out);
  close(result[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return got && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The command line's settings.
struct BenchFlags {
  int bytes = 4096;
  int trips = 5000;
  int rounds = 3;
  std::string poll_strategy;  // Empty: gRPC's default.
};

// False (having said why) when the command line is not valid.
bool ParseBenchFlags(int argc, char** argv, BenchFlags* out) {
  auto flags =
      ParseFlags(argc, argv, {"bytes", "trips", "rounds", "poll_strategy"}, {});
  if (!flags.ok()) {
    std::fprintf(stderr, "%s\n", std::string(flags.status().message()).c_str());
    return false;
  }
  auto bytes = flags->GetInt("bytes", 4096);
  auto trips = flags->GetInt("trips", 5000);
  auto rounds = flags->GetInt("rounds", 3);
  for (const auto* v : {&bytes, &trips, &rounds}) {
    if (!v->ok()) {
      std::fprintf(stderr, "%s\n", std::string(v->status().message()).c_str());
      return false;
    }
  }
  if (*bytes < 0 || *trips < 1 || *rounds < 1) {
    std::fprintf(stderr, "--bytes >= 0, --trips >= 1, --rounds >= 1\n");
    return false;
  }
  out->poll_strategy = flags->Get("poll_strategy", "");
  if (!out->poll_strategy.empty() && out->poll_strategy != "epoll1" &&
      out->poll_strategy != "poll") {
    std::fprintf(stderr, "--poll_strategy: epoll1 or poll\n");
    return false;
  }
  out->bytes = *bytes;
  out->trips = *trips;
  out->rounds = *rounds;
  return true;
}

int Main(int argc, char** argv) {
  BenchFlags flags;
  if (!ParseBenchFlags(argc, argv, &flags)) return 2;
  const int bytes = flags.bytes, trips = flags.trips, rounds = flags.rounds;
  const std::string& poll_strategy = flags.poll_strategy;
  // This process starts no gRPC thread: servers and clients are forked.
  constexpr int kServers = 3;
  const ServerKind kinds[kServers] = {ServerKind::kCallback, ServerKind::kQueue,
                                      ServerKind::kTwoQueues};
  const char* kServerName[kServers] = {"callback", "cq-thread", "cq-2threads"};
  ServerProcess servers[kServers];
  for (int s = 0; s < kServers; ++s) {
    servers[s] = StartServer(kinds[s], poll_strategy);
    if (servers[s].pid < 0) {
      std::fprintf(stderr, "the %s server process did not start\n",
                   kServerName[s]);
      return 1;
    }
  }
  const char* kClientName[2] = {"callback", "cq-caller"};
  const grpc::ByteBuffer message = Payload(bytes);  // Copied by fork.
  std::printf(
      "echo of %d bytes over one bidi stream, %d round trips a form, "
      "servers polling with %s\n",
      bytes, trips,
      poll_strategy.empty() ? "gRPC's default" : poll_strategy.c_str());
  std::printf("%-6s %-12s %-10s %9s %9s %15s %15s\n", "round", "server",
              "client", "p50 us", "mean us", "client sw/trip",
              "server sw/trip");
  int failed = 0;
  for (int round = 1; round <= rounds; ++round) {
    for (int s = 0; s < kServers; ++s) {
      for (int c = 0; c < 2; ++c) {
        Figures f;
        if (!MeasureInChild(servers[s], c == 1, message, trips, &f)) {
          std::printf("%-6d %-12s %-10s the call failed\n", round,
                      kServerName[s], kClientName[c]);
          ++failed;
          continue;
        }
        std::printf("%-6d %-12s %-10s %9.1f %9.1f %15.2f %15.2f\n", round,
                    kServerName[s], kClientName[c], f.p50_us, f.mean_us,
                    f.client_switches, f.server_switches);
        std::fflush(stdout);
      }
    }
  }
  for (const ServerProcess& s : servers) {
    kill(s.pid, SIGKILL);
    waitpid(s.pid, nullptr, 0);
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace paramd

int main(int argc, char** argv) { return paramd::Main(argc, argv); }
