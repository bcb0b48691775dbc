#include "reference/inputs.hpp"

#include <gtest/gtest.h>

namespace d2k {
namespace {

class Identity : public TaskCode {
 public:
  TensorMap reference(TensorMap& inputs, const Scalars&) const override { return {}; }
};

Task task_with(InputInit init, DType dtype = DType::f32) {
  Task task;
  task.name = "test/inputs";
  task.axes = {"T", "H"};
  TensorSpec a{.name = "a", .dtype = dtype, .shape = {"T", "H"}};
  a.init = init;
  TensorSpec b{.name = "b", .dtype = DType::f32, .shape = {"H"}};
  task.inputs = {a, b};
  task.workloads = {Workload{.name = "w", .axes = {{"T", 64}, {"H", 256}}}};
  return task;
}

TEST(Inputs, SameSeedSameValuesOtherSeedOtherValues) {
  const auto task = task_with({});
  Identity code;
  const auto one = make_inputs(task, code, task.workloads[0], 11);
  const auto again = make_inputs(task, code, task.workloads[0], 11);
  const auto other = make_inputs(task, code, task.workloads[0], 12);
  EXPECT_TRUE(at::equal(one.at("a"), again.at("a")));
  EXPECT_FALSE(at::equal(one.at("a"), other.at("a")));
  EXPECT_FALSE(at::equal(one.at("a").flatten().narrow(0, 0, 256), one.at("b")));  // independent streams
}

TEST(Inputs, TheSecondDrawChangesAFewElementsOfEveryInputAndKeepsTheLayout) {
  auto task = task_with(InputInit{.dist = "normal", .std = 2.0}, DType::bf16);
  task.inputs[0].strides = {"H + 8", "1"};  // a padded row stride survives the mix
  task.inputs[1].shape = {"4"};             // a tiny input still gets one change
  Identity code;
  const auto& w = task.workloads[0];
  const auto first = make_inputs(task, code, w, 21);
  const auto second = make_second_inputs(task, code, w, first, 22);
  const auto again = make_second_inputs(task, code, w, first, 22);
  for (const char* name : {"a", "b"}) {
    const auto& x = first.at(name);
    const auto& y = second.at(name);
    EXPECT_EQ(y.sizes(), x.sizes()) << name;
    EXPECT_EQ(y.strides(), x.strides()) << name;
    EXPECT_EQ(y.scalar_type(), x.scalar_type()) << name;
    EXPECT_TRUE(at::equal(y, again.at(name))) << name << ": the same seed gives the same draw";
    const int64_t changed = x.ne(y).sum().item<int64_t>();
    EXPECT_GE(changed, 1) << name;
    // About numel / 1024: 16 expected for a [64, 256]; a generous band for the binomial spread.
    EXPECT_LE(changed, std::max<int64_t>(1, 4 * x.numel() / kSecondDrawChange)) << name;
  }
  EXPECT_GE(first.at("a").ne(second.at("a")).sum().item<int64_t>(), 4);
}

TEST(Inputs, ShapeDtypeAndDistribution) {
  const auto task = task_with(InputInit{.dist = "normal", .mean = 3.0, .std = 0.5}, DType::bf16);
  Identity code;
  const auto a = make_inputs(task, code, task.workloads[0], 1).at("a");
  EXPECT_EQ(a.scalar_type(), at::kBFloat16);
  EXPECT_EQ(a.sizes(), (std::vector<int64_t>{64, 256}));
  const auto f = a.to(at::kDouble);
  EXPECT_NEAR(f.mean().item<double>(), 3.0, 0.05);
  EXPECT_NEAR(f.std().item<double>(), 0.5, 0.05);
}

TEST(Inputs, TiesRecurWithinRows) {
  const auto task = task_with(InputInit{.dist = "ties", .std = 1.0, .quantum = 0.5});
  Identity code;
  const auto a = make_inputs(task, code, task.workloads[0], 3).at("a");
  const auto row = a[0];
  EXPECT_LT(std::get<0>(at::_unique(row)).numel(), row.numel() / 4);
  EXPECT_TRUE(at::equal(at::round(a / 0.5) * 0.5, a));
}

// ties with a nudge: the values sit on the grid or one float32 ulp beside it, about the share asked for
// beside it, never zero moved; so values that differ by one ulp recur in a row.
TEST(Inputs, NudgedTiesAreOneUlpBesideTheGridAndNeverMoveZero) {
  const auto task = task_with(InputInit{.dist = "ties", .std = 0.05, .quantum = 0.0125, .nudge = 0.25});
  Identity code;
  const auto a = make_inputs(task, code, task.workloads[0], 7).at("a");
  const auto grid = at::round(a / 0.0125) * 0.0125;
  const auto off = a != grid;
  const auto nonzero = grid != 0;
  EXPECT_TRUE(at::equal(at::nextafter(grid, a).masked_select(off), a.masked_select(off)));  // one ulp away
  EXPECT_FALSE((off & ~nonzero).any().item<bool>());                                         // zero stays
  const double share = off.to(at::kDouble).sum().item<double>() / nonzero.to(at::kDouble).sum().item<double>();
  EXPECT_NEAR(share, 0.25, 0.02);
}

// sparse_groups: whole groups of `group` consecutive elements are zero or tiny, the rest normal, in
// about the shares asked for; drawn in chunks, the groups still start at multiples of `group`.
TEST(Inputs, SparseGroupsAreWholeGroupsZeroOrTinyInAboutTheirShares) {
  auto task = task_with(InputInit{.dist = "sparse_groups", .std = 1.0, .group = 128, .zero_share = 0.1, .tiny_share = 0.2,
                                  .tiny = 1e-12});
  task.workloads[0].axes = {{"T", 4096}, {"H", 1024}};  // 4 M elements: several drawing chunks
  Identity code;
  const auto a = make_inputs(task, code, task.workloads[0], 5).at("a");
  const auto amax = a.abs().view({-1, 128}).amax(1);
  const auto zero = (amax == 0).to(at::kDouble).mean().item<double>();
  const auto tiny = ((amax > 0) & (amax < 1e-10)).to(at::kDouble).mean().item<double>();
  const auto normal = (amax > 1.0).to(at::kDouble).mean().item<double>();
  EXPECT_NEAR(zero, 0.1, 0.01);
  EXPECT_NEAR(tiny, 0.2, 0.01);
  EXPECT_NEAR(normal, 0.7, 0.01);  // a normal group of 128 has an amax above 1 but for ~1e-12 of them
  EXPECT_NEAR(zero + tiny + normal, 1.0, 1e-12);
}

TEST(Inputs, StudentTHasHeavierTailsThanNormal) {
  Identity code;
  const auto normal = task_with(InputInit{.dist = "normal"});
  const auto heavy = task_with(InputInit{.dist = "student_t", .df = 2.0});
  const double max_normal = make_inputs(normal, code, normal.workloads[0], 5).at("a").abs().max().item<double>();
  const double max_heavy = make_inputs(heavy, code, heavy.workloads[0], 5).at("a").abs().max().item<double>();
  EXPECT_GT(max_heavy, 2.0 * max_normal);
}

// A whole df draws chi2 as a sum of squared normals, any other df through a gamma draw: both must give
// Student's t. The quantiles of |t| with 3 degrees of freedom: 0.7649 (50%), 2.3534 (90%), 5.8409 (99%).
TEST(Inputs, StudentTQuantilesMatchTheDistributionWhicheverWayChi2IsDrawn) {
  Identity code;
  for (double df : {3.0, 3.0 + 1e-9}) {
    SCOPED_TRACE(df);
    auto task = task_with(InputInit{.dist = "student_t", .df = df});
    task.workloads[0].axes = {{"T", 4096}, {"H", 256}};  // 1 M values
    const auto t = make_inputs(task, code, task.workloads[0], 9).at("a").abs().flatten().to(at::kDouble);
    const auto q = at::quantile(t.narrow(0, 0, 1 << 20), at::tensor({0.5, 0.9, 0.99}, at::kDouble));
    EXPECT_NEAR(q[0].item<double>(), 0.7649, 0.01 * 0.7649);
    EXPECT_NEAR(q[1].item<double>(), 2.3534, 0.02 * 2.3534);
    EXPECT_NEAR(q[2].item<double>(), 5.8409, 0.05 * 5.8409);
  }
}

}  // namespace
}  // namespace d2k
