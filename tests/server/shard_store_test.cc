// The shard store: optimizer state lives with each chunk, and a saved state
// restored into a fresh store continues exactly as the original would.
#include "server/store/shard_store.h"

#include <catch2/catch.hpp>
#include <string>

#include "common/base/half.h"
#include "common/model/partitioner.h"
#include "server/optimizer/optimizer.h"

namespace paramd {
namespace {

struct Setup {
  Setup() {
    spec.tensors.push_back({"w", {300}, 300, 0.5f});
    spec.tensors.push_back({"b", {7}, 7, 0.5f});
    spec.total_elements = 307;
    plan = std::make_unique<PartitionPlan>(*PartitionPlan::Build(spec, 256, 1));
  }
  std::unique_ptr<ShardStore> NewStore(const std::string& type) const {
    OptimizerConfig c;
    c.type = type;
    c.learning_rate = 0.01;
    c.momentum = type == "sgd" ? 0.9 : 0.0;
    c.eps = 1e-8;
    return std::make_unique<ShardStore>(spec, *plan, 0, 3, *MakeOptimizer(c));
  }
  // One step with a gradient that depends on the step.
  static void Step(ShardStore& store, int t) {
    std::vector<std::vector<float>> g;
    std::vector<absl::Span<const float>> views;
    for (int i = 0; i < store.num_chunks(); ++i) {
      g.emplace_back(store.chunk_spec(i).length, 0.1f * t - 0.3f * i);
    }
    for (const auto& v : g) views.emplace_back(v);
    store.ApplyStep(views, 1.0f);
  }
  static std::string Params(const ShardStore& store) {
    std::string out;
    store.Read([&](uint64_t v, absl::Span<const std::vector<float>> chunks) {
      out.append(reinterpret_cast<const char*>(&v), sizeof(v));
      for (const auto& c : chunks) {
        out.append(reinterpret_cast<const char*>(c.data()), c.size() * 4);
      }
    });
    return out;
  }
  ModelSpec spec;
  std::unique_ptr<PartitionPlan> plan;
};

TEST_CASE("a restored state continues exactly like the original",
          "[store][optimizer]") {
  Setup s;
  for (const char* type : {"sgd", "adam", "adamw", "rmsprop", "adagrad"}) {
    INFO(type);
    auto original = s.NewStore(type);
    for (int t = 1; t <= 3; ++t) Setup::Step(*original, t);
    std::string saved;
    REQUIRE(original->SaveState(&saved).ok());
    auto restored = s.NewStore(type);
    REQUIRE(Setup::Params(*restored) != Setup::Params(*original));
    REQUIRE(restored->RestoreState(saved).ok());
    CHECK(restored->version() == 3);
    CHECK(Setup::Params(*restored) == Setup::Params(*original));
    // Slots came along: the next steps match bit for bit.
    for (int t = 4; t <= 6; ++t) {
      Setup::Step(*original, t);
      Setup::Step(*restored, t);
    }
    CHECK(Setup::Params(*restored) == Setup::Params(*original));
  }
}

TEST_CASE("a damaged or foreign state is refused and changes nothing",
          "[store]") {
  Setup s;
  auto store = s.NewStore("adam");
  Setup::Step(*store, 1);
  std::string saved;
  REQUIRE(store->SaveState(&saved).ok());
  auto target = s.NewStore("adam");
  const std::string before = Setup::Params(*target);

  CHECK(absl::IsDataLoss(
      target->RestoreState(saved.substr(0, saved.size() - 5))));
  CHECK(absl::IsDataLoss(target->RestoreState(saved + "x")));
  CHECK(
      absl::IsInvalidArgument(target->RestoreState("PDSX" + saved.substr(4))));
  auto sgd = s.NewStore("adagrad");  // one slot, not two
  std::string one_slot;
  REQUIRE(sgd->SaveState(&one_slot).ok());
  absl::Status other = target->RestoreState(one_slot);
  CHECK(absl::IsFailedPrecondition(other));
  CHECK(std::string(other.message()).find("optimizer slots") !=
        std::string::npos);
  CHECK(Setup::Params(*target) == before);
  CHECK(target->version() == 0);
}

TEST_CASE("a pulled snapshot never changes; steps copy only while one is held",
          "[store]") {
  Setup s;
  auto store = s.NewStore("sgd");
  auto plain = s.NewStore("sgd");  // Stepped with no snapshot held.

  std::shared_ptr<const ParamSnapshot> v0 = store->Snapshot();
  const std::vector<std::vector<float>> before = v0->params;
  const float* buffer0 = v0->params[0].data();
  Setup::Step(*store, 1);
  Setup::Step(*plain, 1);
  // The held version is untouched; the step went to another buffer.
  CHECK(v0->version == 0);
  CHECK(v0->params == before);
  std::shared_ptr<const ParamSnapshot> v1 = store->Snapshot();
  CHECK(v1->version == 1);
  CHECK(v1->params != before);
  CHECK(v1->params[0].data() != buffer0);

  // With nothing held, the next step works in place, without a copy.
  const float* buffer1 = v1->params[0].data();
  v0.reset();
  v1.reset();
  Setup::Step(*store, 2);
  Setup::Step(*plain, 2);
  CHECK(store->Snapshot()->params[0].data() == buffer1);
  CHECK(Setup::Params(*store) == Setup::Params(*plain));
}

TEST_CASE("a snapshot's float16 halves follow its version, also in place",
          "[store][fp16]") {
  Setup s;
  auto store = s.NewStore("sgd");
  auto check = [](const ParamSnapshot& snapshot) {
    const std::vector<std::vector<uint16_t>>& halves = snapshot.Halves();
    REQUIRE(halves.size() == snapshot.params.size());
    for (size_t c = 0; c < halves.size(); ++c) {
      REQUIRE(halves[c].size() == snapshot.params[c].size());
      for (size_t i = 0; i < halves[c].size(); ++i) {
        // Within half a unit in the last place of half's 11 bits.
        const float p = snapshot.params[c][i];
        REQUIRE(HalfToFloat(halves[c][i]) ==
                Approx(p).epsilon(1.0 / 2048).margin(1e-7));
        REQUIRE(halves[c][i] == FloatToHalf(p));
      }
    }
  };
  std::shared_ptr<const ParamSnapshot> v0 = store->Snapshot();
  check(*v0);
  const std::vector<uint16_t> first = v0->Halves()[0];
  // The same version's halves are converted once and shared.
  CHECK(&v0->Halves() == &store->Snapshot()->Halves());
  v0.reset();
  // Nothing held: the step works in place; the halves must not go stale.
  Setup::Step(*store, 1);
  std::shared_ptr<const ParamSnapshot> v1 = store->Snapshot();
  CHECK(v1->version == 1);
  check(*v1);
  CHECK(v1->Halves()[0] != first);
}

}  // namespace
}  // namespace paramd

namespace paramd {
namespace {

TEST_CASE("a statistic's chunk adds what is pushed, without the optimizer",
          "[store][optimizer]") {
  ModelSpec spec;
  spec.tensors.push_back({"w", {4}, 4, 0.5f});
  TensorSpec var{"bn1.running_var", {3}, 3, 0};
  var.init_constant = true;
  var.init_value = 1;
  var.kind = TensorKind::kStatistic;
  spec.tensors.push_back(var);
  spec.total_elements = 7;
  const PartitionPlan plan = *PartitionPlan::Build(spec, 1 << 20, 1);
  OptimizerConfig c;
  c.type = "sgd";
  c.learning_rate = 0.5;
  c.momentum = 0.9;
  c.weight_decay = 0.1;
  ShardStore store(spec, plan, 0, 3, *MakeOptimizer(c));
  REQUIRE(store.num_chunks() == 2);
  const std::vector<float> w_grad(4, 1.0f), v_push = {0.5f, -0.25f, 2.0f};
  std::vector<absl::Span<const float>> views = {w_grad, v_push};
  for (int step = 0; step < 2; ++step) store.ApplyStep(views, 0.5f);
  store.Read([&](uint64_t version, absl::Span<const std::vector<float>> p) {
    CHECK(version == 2);
    // 1 + 2 × 0.5 × push: no learning rate, momentum or decay.
    CHECK(p[1] == std::vector<float>{1.5f, 0.75f, 3.0f});
  });
  // A checkpoint carries the statistics like any parameter.
  std::string state;
  REQUIRE(store.SaveState(&state).ok());
  ShardStore restored(spec, plan, 0, 3, *MakeOptimizer(c));
  REQUIRE(restored.RestoreState(state).ok());
  restored.Read([&](uint64_t version, absl::Span<const std::vector<float>> p) {
    CHECK(version == 2);
    CHECK(p[1] == std::vector<float>{1.5f, 0.75f, 3.0f});
  });
  // The plan's fingerprint tells a statistic from a trainable tensor.
  ModelSpec trainable = spec;
  trainable.tensors[1].kind = TensorKind::kTrainable;
  CHECK(PartitionPlan::Build(trainable, 1 << 20, 1)->fingerprint() !=
        plan.fingerprint());
}

}  // namespace
}  // namespace paramd
