#include "worker/rpc/overlap_exchange.h"

#include <algorithm>
#include <string>

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
      links_(calls_.links),
      num_shards_(plan.num_shards()),
      deadline_(links_->options().clock->Now() + calls_.limit),
      unsent_(num_shards_),
      started_(num_shards_, 0),
      ended_(num_shards_, 0) {
  if (frames_->fp16()) {
    halves_ = std::make_shared<std::vector<uint16_t>>(grads_->size());
  }
  for (const ChunkSpec& c : plan_.chunks()) unready_.push_back(c.length);
  // Every step of the exchange goes on an open stream.
  links_->OpenStepStreams();
  for (int s = 0; s < num_shards_; ++s) {
    unsent_[s] = plan_.ChunksOfShard(s).size();
    sinks_.emplace_back(plan_, layout_, s, calls_.pull_half, params);
  }
  // A shard without chunks takes a push of just the header.
  for (int s = 0; s < num_shards_; ++s) {
    if (unsent_[s] == 0) Send(s, {});
  }
}

OverlapExchange::~OverlapExchange() {
  if (running_ == 0) return;
  CancelAll();
  PollUntil([] { return false; });
}

void OverlapExchange::StepDone(int shard, absl::Status s) {
  ended_[shard] = 1;
  --running_;
  if (s.ok() || !failure_.ok()) return;
  failure_ = std::move(s);
  // The others would wait in vain (a reply for a push that failed).
  CancelAll();
}

void OverlapExchange::CancelAll() {
  for (int s = 0; s < num_shards_; ++s) {
    if (started_[s] && !ended_[s]) links_->CancelStep(s);
  }
}

void OverlapExchange::PollUntil(const std::function<bool()>& settled) {
  Clock* clock = links_->options().clock;
  while (running_ > 0 && !settled()) {
    if (clock->Now() >= deadline_ && failure_.ok()) {
      failure_ = absl::DeadlineExceededError(
          absl::StrCat("clock ", clock_, ": the overlapped exchange took over ",
                       absl::FormatDuration(calls_.limit)));
      CancelAll();
    }
    // Cancelled steps end at once; their ends are polled without a limit.
    links_->PollSteps(failure_.ok() ? deadline_ : absl::InfiniteFuture());
  }
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
  // The pieces written before go on, replies come in: between layers.
  links_->DrainSteps();
}

void OverlapExchange::Send(int shard, const std::vector<size_t>& owned) {
  const bool first = !started_[shard];
  unsent_[shard] -= owned.size();
  // After a failure the exchange is done again whole (Finish).
  if (!failure_.ok() || ended_[shard]) return;
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
  grpc::ByteBuffer message =
      frames_->Piece(clock_, loss_, shard, first, unsent_[shard] == 0, owned,
                     flat, std::move(owner));
  if (!first) {
    links_->ContinuePush(shard, std::move(message));
    return;
  }
  started_[shard] = 1;
  ++running_;
  std::vector<grpc::ByteBuffer> messages;
  messages.push_back(std::move(message));
  links_->StartPushPull(
      shard, std::move(messages), &sinks_[shard],
      [this, shard](absl::Status s) { StepDone(shard, std::move(s)); });
}

absl::Status OverlapExchange::AwaitParams(int64_t begin, int64_t end) {
  if (result_.has_value()) return result_->status();
  const auto [first, last] = ChunksOver(begin, end);
  auto arrived = [&, first = first, last = last] {
    for (size_t g = first; g < last; ++g) {
      if (!sinks_[plan_.chunks()[g].shard].Has(static_cast<int>(g))) {
        return false;
      }
    }
    return true;
  };
  PollUntil([&] { return !failure_.ok() || arrived(); });
  if (failure_.ok() && arrived()) return absl::OkStatus();
  // Failed, or the steps ended without these chunks: the whole step again.
  return Finish().status();
}

absl::StatusOr<uint64_t> OverlapExchange::Finish() {
  if (result_.has_value()) return *result_;
  bool complete = true;
  for (size_t n : unsent_) complete = complete && n == 0;
  if (!complete) {
    CancelAll();
    PollUntil([] { return false; });
    result_ = absl::FailedPreconditionError(
        absl::StrCat("clock ", clock_,
                     ": the step's exchange finished before its whole "
                     "gradient was reported"));
    return *result_;
  }
  PollUntil([] { return false; });
  absl::StatusOr<uint64_t> collected = Collect();
  if (!collected.ok()) {
    spdlog::debug("clock {}: overlapped exchange failed ({}); sending again",
                  clock_, std::string(collected.status().message()));
    collected = calls_.redo();
  }
  result_ = std::move(collected);
  return *result_;
}

absl::StatusOr<uint64_t> OverlapExchange::Collect() const {
  RETURN_IF_ERROR(failure_);
  return PulledVersion(sinks_);
}

}  // namespace paramd
