#include "server/store/row_eviction.h"

#include <algorithm>

#include "server/store/row_table.h"

namespace paramd {
namespace {

constexpr int kLastBits = 40;  // A clock below 2^40 updates.

}  // namespace

bool SweepDue(const EvictionConfig& config, int64_t clock, int64_t last_sweep,
              uint64_t rows) {
  if (config.capacity_rows > 0 && rows > config.capacity_rows) return true;
  return config.ttl_steps > 0 &&
         clock - last_sweep >= std::max<int64_t>(1, config.ttl_steps / 8);
}

bool Expired(const EvictionConfig& config, int64_t clock, const RowMeta& row) {
  return config.ttl_steps > 0 && clock - row.last >= config.ttl_steps;
}

uint64_t EvictionKey(const EvictionConfig& config, const RowMeta& row) {
  const uint64_t last =
      static_cast<uint64_t>(row.last) & ((uint64_t{1} << kLastBits) - 1);
  if (!config.lfu) return last;
  const uint64_t count =
      std::min<uint64_t>(row.count, (uint64_t{1} << (64 - kLastBits)) - 1);
  return count << kLastBits | last;
}

uint64_t CapacityTarget(uint64_t capacity_rows) {
  return capacity_rows - capacity_rows / 16;
}

void LeastRows::Offer(const RowVictim& row) {
  if (most_ == 0) return;
  if (kept_.size() < most_) {
    kept_.push_back(row);
    std::push_heap(kept_.begin(), kept_.end(), First);
  } else if (First(row, kept_.front())) {
    std::pop_heap(kept_.begin(), kept_.end(), First);
    kept_.back() = row;
    std::push_heap(kept_.begin(), kept_.end(), First);
  }
}

std::vector<RowVictim> LeastRows::Take(size_t k) && {
  k = std::min(k, kept_.size());
  std::nth_element(kept_.begin(), kept_.begin() + k, kept_.end(), First);
  kept_.resize(k);
  return std::move(kept_);
}

RowEvictor::RowEvictor(std::vector<RowTable*> tables)
    : tables_(std::move(tables)), thread_([this] { Run(); }) {}

RowEvictor::~RowEvictor() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void RowEvictor::Wake() {
  absl::MutexLock lock(&mu_);
  woken_ = true;
}

uint64_t RowEvictor::sweeps() const {
  absl::MutexLock lock(&mu_);
  return sweeps_;
}

bool RowEvictor::AwaitSweeps(uint64_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto ran = [this, n]()
                 ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return sweeps_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&ran), timeout);
}

void RowEvictor::Run() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return woken_ || stop_;
      };
      mu_.Await(absl::Condition(&woken));
      if (stop_) return;
      woken_ = false;
    }
    uint64_t ran = 0;
    for (RowTable* table : tables_) {
      if (table->sweep_due()) {
        table->Sweep();
        ++ran;
      }
    }
    absl::MutexLock lock(&mu_);
    sweeps_ += ran;
  }
}

}  // namespace paramd
