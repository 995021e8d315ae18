#include "worker/rpc/overlap_exchange.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "spdlog/spdlog.h"

namespace paramd {

OverlapIndex::OverlapIndex(const PartitionPlan& plan, const FlatLayout& layout)
    : local(plan.chunks().size()) {
  for (const ChunkSpec& c : plan.chunks()) {
    begin.push_back(FlatOffset(layout, c));
  }
  for (int s = 0; s < plan.num_shards(); ++s) {
    const std::vector<int>& owned = plan.ChunksOfShard(s);
    for (size_t k = 0; k < owned.size(); ++k) local[owned[k]] = k;
  }
}

OverlapExchange::OverlapExchange(
    const PartitionPlan& plan, const FlatLayout& layout,
    const OverlapIndex& index, PushFrames* frames, uint64_t clock, float loss,
    std::shared_ptr<const std::vector<float>> grads, absl::Span<float> params,
    OverlapCalls calls)
    : plan_(plan),
      layout_(layout),
      index_(index),
      frames_(frames),
      clock_(clock),
      loss_(loss),
      grads_(std::move(grads)),
      calls_(std::move(calls)),
      num_shards_(plan.num_shards()),
      unsent_(num_shards_),
      started_(num_shards_, 0),
      pushes_(num_shards_, nullptr) {
  if (frames_->fp16()) {
    halves_ = std::make_shared<std::vector<uint16_t>>(grads_->size());
  }
  for (int s = 0; s < num_shards_; ++s) {
    unsent_[s] = plan_.ChunksOfShard(s).size();
  }
  for (const ChunkSpec& c : plan_.chunks()) unready_.push_back(c.length);
  {
    absl::MutexLock lock(&mu_);
    for (int s = 0; s < num_shards_; ++s) {
      sinks_.emplace_back(plan_, layout_, s, calls_.pull_half, params);
    }
    push_replies_.resize(num_shards_);
    running_ = 2 * num_shards_;
    pulls_running_ = num_shards_;
  }
  for (int s = 0; s < num_shards_; ++s) {
    contexts_.push_back(std::make_unique<grpc::ClientContext>());
    contexts_.push_back(std::make_unique<grpc::ClientContext>());
  }
  for (int s = 0; s < num_shards_; ++s) {
    grpc::ClientContext* pull = contexts_[2 * s + 1].get();
    pull->set_deadline(absl::ToChronoTime(absl::Now() + calls_.pull_timeout));
    StreamCall::Start(
        calls_.stubs[s], pull, calls_.pull_stream_method, {calls_.pull_request},
        [this, s](const grpc::ByteBuffer& m) {
          absl::MutexLock lock(&mu_);
          return sinks_[s].Consume(m);
        },
        [this](absl::Status st) {
          {
            absl::MutexLock lock(&mu_);
            --pulls_running_;
          }
          CallDone(std::move(st));
        });
    grpc::ClientContext* push = contexts_[2 * s].get();
    push->set_deadline(absl::ToChronoTime(absl::Now() + calls_.push_timeout));
    pushes_[s] = OpenStream::Start(
        calls_.stubs[s], push, calls_.push_stream_method,
        [this, s](const grpc::ByteBuffer& m) {
          absl::MutexLock lock(&mu_);
          push_replies_[s] = m;
          return absl::OkStatus();
        },
        [this](absl::Status st) { CallDone(std::move(st)); });
    // A shard without chunks takes a push of just the header.
    if (unsent_[s] == 0) Send(s, {});
  }
}

OverlapExchange::~OverlapExchange() {
  if (!result_.has_value()) {
    CancelAll();
    Drain();
  }
}

void OverlapExchange::CallDone(absl::Status s) {
  bool cancel = false;
  {
    absl::MutexLock lock(&mu_);
    if (!s.ok() && failure_.ok()) {
      failure_ = std::move(s);
      cancel = true;
    }
  }
  // The others would wait in vain (a pull for a push that failed).
  if (cancel) CancelAll();
  // Last: once no call runs, Drain returns and the exchange may be deleted
  // (a call counted down before the cancel above read freed contexts).
  absl::MutexLock lock(&mu_);
  --running_;
}

void OverlapExchange::CancelAll() {
  for (auto& context : contexts_) context->TryCancel();
}

std::pair<size_t, size_t> OverlapExchange::ChunksOver(int64_t begin,
                                                      int64_t end) const {
  const std::vector<int64_t>& starts = index_.begin;
  auto first =
      std::upper_bound(starts.begin(), starts.end(), begin) - starts.begin();
  auto last =
      std::lower_bound(starts.begin(), starts.end(), end) - starts.begin();
  return {static_cast<size_t>(std::max<ptrdiff_t>(first - 1, 0)),
          static_cast<size_t>(last)};
}

void OverlapExchange::GradientReady(int64_t begin, int64_t end) {
  std::vector<std::vector<size_t>> ready(num_shards_);
  const auto [first, last] = ChunksOver(begin, end);
  for (size_t g = first; g < last; ++g) {
    const int64_t chunk_end = index_.begin[g] + plan_.chunks()[g].length;
    const int64_t covered =
        std::min(end, chunk_end) - std::max(begin, index_.begin[g]);
    if (covered <= 0 || unready_[g] == 0) continue;
    unready_[g] -= std::min(covered, unready_[g]);
    if (unready_[g] == 0)
      ready[plan_.chunks()[g].shard].push_back(index_.local[g]);
  }
  for (int s = 0; s < num_shards_; ++s) {
    if (!ready[s].empty()) Send(s, ready[s]);
  }
}

void OverlapExchange::Send(int shard, const std::vector<size_t>& owned) {
  if (pushes_[shard] == nullptr) return;
  const void* flat = grads_->data();
  std::shared_ptr<const void> owner = grads_;
  if (halves_ != nullptr) {
    const std::vector<int>& chunks = plan_.ChunksOfShard(shard);
    for (size_t k : owned) {
      const ChunkSpec& c = plan_.chunks()[chunks[k]];
      const int64_t at = FlatOffset(layout_, c);
      frames_->Halve(absl::MakeConstSpan(*grads_).subspan(at, c.length),
                     absl::MakeSpan(*halves_).subspan(at, c.length));
    }
    flat = halves_->data();
    owner = halves_;
  }
  grpc::ByteBuffer message = frames_->Piece(
      clock_, loss_, shard, !started_[shard], owned, flat, std::move(owner));
  started_[shard] = 1;
  unsent_[shard] -= owned.size();
  const bool last = unsent_[shard] == 0;
  pushes_[shard]->Write(std::move(message), last);
  if (last) pushes_[shard] = nullptr;
}

absl::Status OverlapExchange::AwaitParams(int64_t begin, int64_t end) {
  if (result_.has_value()) return result_->status();
  const std::pair<size_t, size_t> range = ChunksOver(begin, end);
  const size_t first = range.first, last = range.second;
  auto arrived = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (size_t g = first; g < last; ++g) {
      if (!sinks_[plan_.chunks()[g].shard].Has(static_cast<int>(g))) {
        return false;
      }
    }
    return true;
  };
  {
    absl::MutexLock lock(&mu_);
    auto settled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !failure_.ok() || pulls_running_ == 0 || arrived();
    };
    mu_.Await(absl::Condition(&settled));
    if (failure_.ok() && arrived()) return absl::OkStatus();
  }
  // Failed, or the pulls ended without these chunks: the whole step again.
  return Finish().status();
}

void OverlapExchange::Drain() {
  for (OpenStream*& push : pushes_) {
    if (push != nullptr) push->Abandon();
    push = nullptr;
  }
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* running) { return *running == 0; }, &running_));
}

absl::StatusOr<uint64_t> OverlapExchange::Finish() {
  if (result_.has_value()) return *result_;
  bool complete = true;
  for (size_t n : unsent_) complete = complete && n == 0;
  if (!complete) {
    CancelAll();
    Drain();
    result_ = absl::FailedPreconditionError(
        absl::StrCat("clock ", clock_,
                     ": the step's exchange finished before its whole "
                     "gradient was reported"));
    return *result_;
  }
  Drain();
  absl::StatusOr<uint64_t> collected = Collect();
  if (!collected.ok()) {
    spdlog::debug("clock {}: overlapped exchange failed ({}); sending again",
                  clock_, std::string(collected.status().message()));
    collected = calls_.redo();
  }
  result_ = std::move(collected);
  return *result_;
}

absl::StatusOr<uint64_t> OverlapExchange::Collect() {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(failure_);
  uint64_t version = UINT64_MAX;
  for (int s = 0; s < num_shards_; ++s) {
    ASSIGN_OR_RETURN(uint64_t pushed, PushedVersion(push_replies_[s]));
    (void)pushed;
    ASSIGN_OR_RETURN(uint64_t v, sinks_[s].Finish());
    version = std::min(version, v);
  }
  return version;
}

}  // namespace paramd
