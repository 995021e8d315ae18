#include "worker/rpc/step_calls.h"

#include <utility>

#include "absl/strings/match.h"

namespace paramd {

StepCalls::StepCalls(const ClientSetup& setup, ShardLinks* links,
                     const Messages& messages, absl::Span<float> params)
    : plan_(*setup.plan),
      layout_(*setup.layout),
      pull_half_(setup.config->compression.pull_fp16()),
      links_(links),
      make_messages_(messages),
      params_(params) {}

void StepCalls::Begin(bool timed) {
  // Streams first: a new stream has a new segment, which the messages
  // name.
  links_->OpenStepStreams();
  std::vector<SharedSegment*> segments;
  for (int i = 0; i < links_->size(); ++i) {
    segments.push_back(links_->segment(i));
  }
  messages_ = make_messages_(segments);
  sinks_.clear();
  for (int i = 0; i < links_->size(); ++i) {
    sinks_.emplace_back(plan_, layout_, i, pull_half_, params_);
    if (timed) sinks_.back().TimeFirstMessage();
  }
}

void StepCalls::Start(int shard, ShardCallTimes* times,
                      std::function<void(absl::Status)> done) {
  PullSink* sink = &sinks_[shard];
  auto ended = [this, shard, sink, times,
                done = std::move(done)](absl::Status s) {
    if (absl::IsFailedPrecondition(s) &&
        absl::StrContains(s.message(), "shared memory segment")) {
      links_->RefuseSegment(shard);
    }
    if (times != nullptr) times->replied = sink->first_message();
    done(std::move(s));
  };
  links_->StartPushPull(shard, std::move(messages_[shard]), sink,
                        std::move(ended),
                        times != nullptr ? &times->pushed : nullptr);
}

}  // namespace paramd
