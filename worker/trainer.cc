#include "worker/trainer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/mix.h"
#include "common/base/status_macros.h"
#include "common/config/layer_shapes.h"
#include "spdlog/spdlog.h"
#include "worker/data/augment.h"
#include "worker/faults/slow_model.h"
#include "worker/model/model_factory.h"
#include "worker/test_tally.h"

namespace paramd {

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(
    const JobConfig& config, int rank, TrainerOptions options,
    ParameterClientFactory make_client) {
  if (rank < 0 || rank >= config.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rank: ", rank, " is outside [0, ", config.num_workers,
                     ") for the job's cluster.workers"));
  }
  RETURN_IF_ERROR(CheckWorkerModelType(config));
  ModelSpec spec = BuildModelSpec(config.model);
  ASSIGN_OR_RETURN(
      PartitionPlan plan,
      PartitionPlan::Build(spec, config.chunk_bytes, config.num_shards()));
  ASSIGN_OR_RETURN(std::unique_ptr<TrainingData> data,
                   TrainingData::Load(config, rank));
  absl::StatusOr<LayerGraph> graph = InferLayerGraph(config.model);
  if (!graph.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.path, ": ", graph.status().message()));
  }
  const int64_t inputs = graph->input.size();
  const int classes = graph->classes();
  const char* field = graph->dense_stack ? "model.layers" : "model.input";
  // A sparse front takes the data's ids (or an image's features); without
  // one, the data's images are the input as they are.
  if (!graph->front.has_value()) {
    if (data->values_per_sample() != inputs) {
      return absl::InvalidArgumentError(absl::StrCat(
          config.path, ": ", field, ": the input is ", graph->input.ToString(),
          " (", inputs, " values) but the data has ", data->values_per_sample(),
          " pixels per image"));
    }
    if (graph->input.image &&
        (data->height() != graph->input.h || data->width() != graph->input.w ||
         graph->input.c != 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          config.path, ": model.input: ", graph->input.ToString(),
          " but the data's images are 1×", data->height(), "×", data->width()));
    }
  }
  if (data->num_classes() > classes) {
    return absl::InvalidArgumentError(absl::StrCat(
        config.path, ": model.layers: ", classes, " outputs but the data has ",
        data->num_classes(), " classes"));
  }
  return std::unique_ptr<Trainer>(new Trainer(
      config, rank, std::move(options), std::move(make_client), std::move(spec),
      std::move(plan), std::move(data), std::move(graph->front)));
}

Trainer::Trainer(const JobConfig& config, int rank, TrainerOptions options,
                 ParameterClientFactory make_client, ModelSpec spec,
                 PartitionPlan plan, std::unique_ptr<TrainingData> data,
                 std::optional<SparseFront> front)
    : config_(config),
      rank_(rank),
      options_(std::move(options)),
      make_client_(std::move(make_client)),
      spec_(std::move(spec)),
      plan_(std::move(plan)),
      layout_(spec_),
      data_(std::move(data)),
      trace_(config, rank, plan_.num_shards()) {
  if (front.has_value()) front_.emplace(*front);
  params_.resize(layout_.total);
}

absl::Status Trainer::PullAt(uint64_t clock) {
  if (pulled_clock_ == static_cast<int64_t>(clock)) return absl::OkStatus();
  ASSIGN_OR_RETURN(uint64_t version,
                   client_->Pull(clock, absl::MakeSpan(params_)));
  pulled_clock_ = static_cast<int64_t>(clock);
  if (options_.on_pull) options_.on_pull(version, params_);
  return absl::OkStatus();
}

absl::Status Trainer::Run() {
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                   MakeModel(config_, std::max(data_->max_batch(), 1024)));
  // A slow rank (the fault layer: worker/faults) wraps the model.
  model_ = MaybeSlow(std::move(model), config_.testing, rank_, options_.clock);
  // (Create has inferred the graph once already: it cannot fail here.)
  ASSIGN_OR_RETURN(const LayerGraph graph, InferLayerGraph(config_.model));
  classes_ = graph.classes();
  if (front_.has_value()) {
    if (!data_->ids()) {
      // An image's ids are its hashed features.
      ASSIGN_OR_RETURN(
          ImageFeatures features,
          ImageFeatures::Create(config_.model.features,
                                config_.model.embeddings[front_->table()].rows,
                                data_->values_per_sample()));
      features_.emplace(std::move(features));
    }
    RETURN_IF_ERROR(model_->EnableInputGradient());
  }
  ClientSetup setup{&config_, &plan_, &layout_, rank_};
  setup.on_trace = trace_.OnTrace();
  ASSIGN_OR_RETURN(client_, make_client_(setup));
  heartbeats_ = std::make_unique<Heartbeats>(
      client_.get(), absl::Seconds(config_.liveness.heartbeat_seconds));
  heartbeats_->Start();
  absl::Status result = Train();
  heartbeats_->Stop();
  trace_.Write();
  if (result.ok()) {
    client_->Heartbeat(heartbeats_->clock(), /*finished=*/true,
                       absl::Seconds(5));
  }
  return result;
}

absl::StatusOr<uint64_t> Trainer::Join() {
  pending_.reset();
  ASSIGN_OR_RETURN(uint64_t clock, client_->Register());
  pulled_clock_ = -1;
  heartbeats_->SetClock(clock);
  return clock;
}

absl::Status Trainer::Train() {
  ASSIGN_OR_RETURN(uint64_t clock, Join());
  const int64_t steps = data_->steps_per_epoch();
  const uint64_t total = static_cast<uint64_t>(steps) * config_.training.epochs;
  LogStart(clock);
  Batch batch;
  EpochState epoch;
  int64_t done_steps = 0;
  while (true) {
    while (clock < total) {
      if (options_.max_steps >= 0 && done_steps >= options_.max_steps) break;
      if (epoch.epoch != static_cast<int>(clock / steps)) {
        epoch =
            EpochState{static_cast<int>(clock / steps), options_.clock->Now()};
        data_->StartEpoch(config_.seed, epoch.epoch, config_.training.shuffle);
      }
      bool stepped = false;
      RETURN_IF_ERROR(Step(&clock, &batch, &epoch, &stepped));
      if (!stepped) continue;
      ++done_steps;
      if (clock % steps == 0) {
        // The epoch's last parameters are evaluated.
        if (absl::Status s = FinishPending(); !s.ok()) {
          if (!absl::IsAborted(s)) return s;
          RETURN_IF_ERROR(Rejoin(s, &clock));
          continue;
        }
        RETURN_IF_ERROR(EndEpoch(
            epoch, absl::ToDoubleSeconds(options_.clock->Now() - epoch.start),
            &clock));
      }
    }
    // The final parameters; a restarted server may send the rank back.
    absl::Status s = FinishPending();
    if (s.ok()) s = PullAt(clock);
    if (!absl::IsAborted(s)) return s;
    RETURN_IF_ERROR(Rejoin(s, &clock));
  }
}

void Trainer::SkipAhead(uint64_t version, uint64_t* clock) const {
  // Under sync the version is the round; without backup workers it never
  // runs ahead of the rank's clock.
  if (config_.policy.backup_workers == 0 || version <= *clock) return;
  // Not past the epoch's end: the epoch is still reported and evaluated.
  const uint64_t steps = static_cast<uint64_t>(data_->steps_per_epoch());
  const uint64_t epoch_end = (*clock + steps - 1) / steps * steps;
  const uint64_t to = std::min(version, epoch_end);
  if (to <= *clock) return;
  spdlog::debug("rank {}: round {} closed without it; skipping clocks {}-{}",
                rank_, *clock - 1, *clock, to - 1);
  *clock = to;
}

absl::Status Trainer::Rejoin(const absl::Status& why, uint64_t* clock) {
  spdlog::warn("rank {}: {}; registering again", rank_,
               std::string(why.message()));
  ASSIGN_OR_RETURN(*clock, Join());
  return absl::OkStatus();
}

void Trainer::LogStart(uint64_t clock) const {
  spdlog::info(
      "rank {}: {} training samples, {} steps per epoch of batch {}, {} test "
      "samples; compute on {}; starting at clock {}",
      rank_, data_->train_size(), data_->steps_per_epoch(),
      config_.training.batch_size, data_->test_size(), model_->Describe(),
      clock);
}

absl::Status Trainer::Step(uint64_t* clock, Batch* batch, EpochState* epoch,
                           bool* stepped) {
  // Clock reads for the timeline only when this step is traced.
  StepTimes times;
  times.traced = trace_.Wants(*clock);
  times.began = times.Stamp();
  // With an exchange in flight, that brings this clock's parameters.
  if (absl::Status s = pending_ ? absl::OkStatus() : PullAt(*clock); !s.ok()) {
    // A shard that restarted no longer knows the rank.
    if (absl::IsAborted(s)) return Rejoin(s, clock);
    return s;
  }
  times.data = times.Stamp();
  const int64_t step = static_cast<int64_t>(*clock % data_->steps_per_epoch());
  // Dropout's masks and the batch's augmentation are a function of (seed,
  // rank, clock): a retried or restored step computes the same gradient.
  const uint64_t step_seed =
      Mix(config_.seed ^ Mix((static_cast<uint64_t>(rank_) << 40) ^ *clock));
  ASSIGN_OR_RETURN(const int n, MakeBatch(*clock, step, step_seed, batch));
  const float* input = batch->samples.x.data();
  if (front_.has_value()) {
    absl::StatusOr<const float*> h = FrontInput(*clock, batch->samples, n);
    if (absl::IsAborted(h.status())) return Rejoin(h.status(), clock);
    RETURN_IF_ERROR(h.status());
    input = *h;
  }
  const int32_t* labels = batch->samples.y.data();
  model_->SetStepSeed(step_seed);
  // Computed straight into the buffer the push sends from.
  const absl::Span<float> grads = client_->GradientBuffer();
  if (config_.worker.overlap) {
    return OverlappedStep(clock, input, labels, n, grads, epoch, stepped,
                          {times.traced, times.began, times.data});
  }
  times.compute = times.Stamp();
  ASSIGN_OR_RETURN(const double loss,
                   Compute(input, labels, n, grads, times.traced));
  times.push = times.Stamp();
  absl::StatusOr<uint64_t> version =
      Exchange(*clock, step, grads, loss, times.traced);
  if (absl::IsAborted(version.status())) {
    return Rejoin(version.status(), clock);
  }
  RETURN_IF_ERROR(version.status());
  if (times.traced) {
    TraceStep(*clock, times, loss, *version, grads.size() * sizeof(float));
  }
  trace_.WriteIfDone(*clock + 1);
  if (options_.on_step) options_.on_step(*clock, loss);
  ++*clock;
  SkipAhead(*version, clock);
  heartbeats_->SetClock(*clock);
  pulled_clock_ = static_cast<int64_t>(*clock);
  if (options_.on_pull) options_.on_pull(*version, params_);
  epoch->loss_sum += loss * n;
  epoch->samples += n;
  *stepped = true;
  return absl::OkStatus();
}

absl::StatusOr<int> Trainer::MakeBatch(uint64_t clock, int64_t step,
                                       uint64_t step_seed, Batch* batch) {
  int n = prefetched_n_;
  if (prefetched_clock_ == static_cast<int64_t>(clock)) {
    // Made while the last step waited; an epoch's order is a function of
    // (seed, epoch), so it is the batch TrainBatch would give now.
    std::swap(batch->samples, prefetched_);
  } else {
    ASSIGN_OR_RETURN(n, data_->TrainBatch(step, &batch->samples));
  }
  prefetched_clock_ = -1;
  if (!data_->ids()) {
    AugmentBatch(config_.data.augment, step_seed, n, /*channels=*/1,
                 data_->height(), data_->width(), batch->samples.x.data(),
                 &batch->augment_scratch);
  }
  return n;
}

absl::StatusOr<double> Trainer::Compute(const float* input,
                                        const int32_t* labels, int n,
                                        absl::Span<float> grads, bool traced) {
  model_->TimeForward(traced);
  ASSIGN_OR_RETURN(double loss,
                   model_->ComputeGradients(params_, input, labels, n, grads));
  if (front_.has_value()) {
    // The rows' gradients ride with this step's push (Exchange).
    row_grads_.resize(front_->unique_ids().size() * front_->dim());
    front_->Backward(model_->InputGradient().data(),
                     absl::MakeSpan(row_grads_));
  }
  return loss;
}

absl::StatusOr<uint64_t> Trainer::Exchange(uint64_t clock, int64_t step,
                                           absl::Span<const float> grads,
                                           double loss, bool traced) {
  // Push this step's gradient and fetch the next version in one go; the
  // next batch is made while the servers answer, when the next clock is in
  // this epoch (the next epoch is shuffled first).
  StepRequest request{clock, grads, static_cast<float>(loss),
                      absl::MakeSpan(params_)};
  if (front_.has_value()) {
    request.rows.push_back(RowGradients{static_cast<uint32_t>(front_->table()),
                                        front_->unique_ids(), row_grads_});
  }
  request.timed = traced;
  if (step + 1 < data_->steps_per_epoch()) {
    const int64_t next = static_cast<int64_t>(clock) + 1;
    request.while_waiting = [this, next, step] {
      absl::StatusOr<int> made = data_->TrainBatch(step + 1, &prefetched_);
      if (!made.ok()) return;  // Made again, and refused, by its step.
      prefetched_n_ = *made;
      prefetched_clock_ = next;
    };
  }
  ASSIGN_OR_RETURN(StepReport report, client_->Step(std::move(request)));
  call_times_ = std::move(report.times);
  return report.version;
}

void Trainer::TraceStep(uint64_t clock, const StepTimes& times, double loss,
                        uint64_t version, size_t bytes) {
  const absl::Time end = absl::Now();
  trace_.Add("data", 0, times.data, times.compute, clock);
  trace_.Add("forward+backward", 0, times.compute, times.push, clock,
             absl::StrCat("\"loss\":", loss));
  // Inside it, where the backend tells (the CPU layer graph).
  if (const absl::Time f = model_->ForwardEnd(); f != absl::InfinitePast()) {
    trace_.Add("forward", 0, times.compute, f, clock);
    trace_.Add("backward", 0, f, times.push, clock);
  }
  trace_.Add("push+pull", 0, times.push, end, clock,
             absl::StrCat("\"version\":", version, ",\"bytes\":", bytes));
  trace_.Add("step", 0, times.began, end, clock);
  trace_.AddShardCalls(clock, call_times_);
}

absl::Status Trainer::OverlappedStep(uint64_t* clock, const float* input,
                                     const int32_t* y, int n,
                                     absl::Span<float> grads, EpochState* epoch,
                                     bool* stepped, StepBegin times) {
  const bool traced = times.traced;
  const absl::Time compute_begin = traced ? absl::Now() : absl::InfinitePast();
  std::unique_ptr<StepExchange> next;
  StepHooks hooks;
  hooks.piece = config_.chunk_bytes / static_cast<int64_t>(sizeof(float));
  hooks.await_params = [this](int64_t begin, int64_t end) {
    return pending_ ? pending_->AwaitParams(begin, end) : absl::OkStatus();
  };
  hooks.gradients_begin = [&](double loss) -> absl::Status {
    // The forward pass read all of params_: the last exchange is done.
    RETURN_IF_ERROR(FinishPending());
    next_params_.resize(params_.size());
    exchange_begin_ = traced ? absl::Now() : absl::InfinitePast();
    next = client_->StartPushPull(*clock, grads, static_cast<float>(loss),
                                  absl::MakeSpan(next_params_));
    return absl::OkStatus();
  };
  hooks.gradient_ready = [&](int64_t begin, int64_t end) {
    next->GradientReady(begin, end);
  };
  absl::StatusOr<double> loss =
      model_->ComputeOverlapped(params_, input, y, n, grads, hooks);
  if (!loss.ok()) {
    pending_.reset();
    if (absl::IsAborted(loss.status())) return Rejoin(loss.status(), clock);
    return loss.status();
  }
  if (traced) {
    // The exchange goes on into the next step: its push+pull is on a lane
    // of its own (FinishPending).
    const absl::Time end = absl::Now();
    trace_.Add("data", 0, times.data, compute_begin, *clock);
    trace_.Add("forward+backward", 0, compute_begin, end, *clock,
               absl::StrCat("\"loss\":", *loss, ",\"overlapped\":true"));
    trace_.Add("step", 0, times.step, end, *clock);
  }
  // The next step computes on what this exchange brings.
  pending_ = std::move(next);
  pending_clock_ = *clock;
  pending_loss_ = *loss;
  std::swap(params_, next_params_);
  pulled_clock_ = -1;
  ++*clock;
  heartbeats_->SetClock(*clock);
  epoch->loss_sum += *loss * n;
  epoch->samples += n;
  *stepped = true;
  return absl::OkStatus();
}

absl::Status Trainer::FinishPending() {
  if (pending_ == nullptr) return absl::OkStatus();
  absl::StatusOr<uint64_t> version = pending_->Finish();
  pending_.reset();
  RETURN_IF_ERROR(version.status());
  pulled_clock_ = static_cast<int64_t>(pending_clock_ + 1);
  // (A window armed since the exchange began has no start for it.)
  if (trace_.Wants(pending_clock_) && exchange_begin_ != absl::InfinitePast()) {
    trace_.Add("push+pull", trace_.exchange_lane(), exchange_begin_,
               absl::Now(), pending_clock_,
               absl::StrCat("\"version\":", *version,
                            ",\"bytes\":", layout_.total * sizeof(float)));
  }
  trace_.WriteIfDone(pending_clock_ + 1);
  if (options_.on_step) options_.on_step(pending_clock_, pending_loss_);
  if (options_.on_pull) options_.on_pull(*version, params_);
  return absl::OkStatus();
}

absl::Status Trainer::EndEpoch(const EpochState& state, double seconds,
                               uint64_t* clock) {
  // Evaluate the parameters pulled after the epoch's last push (under sync:
  // every worker's last push of the epoch made them). A restarted shard no
  // longer knows the rank (ABORTED): register again and evaluate (at the
  // same clock only: else the epoch ends again) or report once more.
  EpochReport report;
  absl::Status s = EvaluateTest(*clock, &report);
  if (absl::IsAborted(s)) {
    const uint64_t before = *clock;
    RETURN_IF_ERROR(Rejoin(s, clock));
    if (*clock != before) return absl::OkStatus();
    s = EvaluateTest(*clock, &report);  // Every test field filled anew.
  }
  RETURN_IF_ERROR(s);
  report.epoch = state.epoch + 1;
  report.train_loss_sum = state.loss_sum;
  report.train_samples = static_cast<uint64_t>(state.samples);
  report.train_seconds = seconds;
  const double accuracy = static_cast<double>(report.test_correct) /
                          std::max<uint64_t>(1, report.test_total);
  spdlog::info(
      "rank {}: epoch {}/{}: train loss {:.4f}, test accuracy {:.4f} on this "
      "rank's {} samples, {:.0f} samples/s",
      rank_, report.epoch, config_.training.epochs,
      state.samples > 0 ? state.loss_sum / state.samples : 0.0, accuracy,
      report.test_total, seconds > 0 ? state.samples / seconds : 0.0);
  s = client_->ReportEpoch(report);
  if (!absl::IsAborted(s)) return s;
  RETURN_IF_ERROR(Rejoin(s, clock));
  return client_->ReportEpoch(report);
}

absl::StatusOr<const float*> Trainer::FrontInput(uint64_t clock,
                                                 const SampleBatch& samples,
                                                 int n) {
  if (features_.has_value()) {
    features_->Featurize(samples.x.data(), n, &image_ids_);
    RETURN_IF_ERROR(front_->SetIds(
        absl::MakeConstSpan(image_ids_)
            .subspan(0, static_cast<size_t>(n) * features_->ids_per_sample()),
        n, features_->ids_per_sample()));
  } else {
    const int k = static_cast<int>(data_->values_per_sample());
    RETURN_IF_ERROR(front_->SetIds(
        absl::MakeConstSpan(samples.ids).subspan(0, static_cast<size_t>(n) * k),
        n, k));
  }
  RETURN_IF_ERROR(client_->PullRows(clock, front_->table(),
                                    front_->unique_ids(), front_->rows()));
  front_out_.resize(static_cast<size_t>(n) * front_->width());
  front_->Forward(samples.x.data(), front_out_.data());
  return front_out_.data();
}

absl::Status Trainer::EvaluateTest(uint64_t clock, EpochReport* report) {
  // Batches of 1024 (the CPU backend's own evaluation batch for the MLP),
  // or of the training batch's size where each batch pulls its rows.
  const int64_t total = data_->test_size();
  const int batch = front_.has_value() ? std::max(1, data_->max_batch()) : 1024;
  TestTally tally(classes_);
  for (int64_t begin = 0; begin < total; begin += batch) {
    ASSIGN_OR_RETURN(const int n, data_->TestBatch(begin, batch, &eval_));
    const float* x = eval_.x.data();
    if (front_.has_value()) {
      ASSIGN_OR_RETURN(x, FrontInput(clock, eval_, n));
    }
    if (tally.scored()) {
      logits_.resize(static_cast<size_t>(n) * classes_);
      RETURN_IF_ERROR(model_->Logits(params_, x, n, absl::MakeSpan(logits_)));
      tally.AddLogits(logits_.data(), eval_.y.data(), n);
    } else {
      ASSIGN_OR_RETURN(int64_t c,
                       model_->CountCorrect(params_, x, eval_.y.data(), n));
      tally.AddCorrect(c);
    }
  }
  tally.Fill(static_cast<uint64_t>(total), report);
  return absl::OkStatus();
}

}  // namespace paramd
