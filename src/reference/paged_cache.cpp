#include "reference/paged_cache.hpp"

#include "core/error.hpp"

namespace d2k {

std::vector<int64_t> paged_lengths(const Task& task, const Workload& workload, int64_t page) {
  const auto axis = [&](const char* name) { return workload.axes.at(name); };
  const auto pages_of = [page](int64_t length) { return (length + page - 1) / page; };
  const int64_t count = axis("B"), shortest = axis("Lmin"), longest = axis("Lmax");
  if (shortest < 1 || longest < shortest || (count == 1 && longest != shortest))
    fail("{}: workload '{}': Lmin = {}, Lmax = {} with B = {} (1 <= Lmin <= Lmax, equal when B = 1)", task.name,
         workload.name, shortest, longest, count);
  std::vector<int64_t> lengths(count, shortest);
  for (int64_t b = 1; b < count; ++b) lengths[b] = shortest + b * (longest - shortest) / (count - 1);
  int64_t tokens = 0, pages = 0;
  for (const int64_t length : lengths) tokens += length, pages += pages_of(length);
  if (tokens != axis("N")) fail("{}: workload '{}': N = {}, its lengths sum to {}", task.name, workload.name, axis("N"), tokens);
  if (pages != axis("P")) fail("{}: workload '{}': P = {}, its lengths fill {} pages", task.name, workload.name, axis("P"), pages);
  if (pages > axis("NB"))
    fail("{}: workload '{}': NB = {}, fewer than the P = {} pages used", task.name, workload.name, axis("NB"), pages);
  if (pages_of(longest) > axis("MB"))
    fail("{}: workload '{}': MB = {}, fewer than the {} pages of Lmax = {}", task.name, workload.name, axis("MB"),
         pages_of(longest), longest);
  return lengths;
}

PagedTable draw_paged_table(const std::vector<int64_t>& lengths, int64_t blocks, int64_t width, int64_t page,
                            at::Generator& gen) {
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  const auto batch = static_cast<int64_t>(lengths.size());
  const at::Tensor order = at::randperm(batch, gen, i64);
  const at::Tensor pages = at::randperm(blocks, gen, i64);
  at::Tensor table = at::randint(0, blocks, {batch, width}, gen, i64);
  std::vector<int32_t> seq_lens(batch);
  for (int64_t b = 0, next = 0; b < batch; ++b) {
    seq_lens[b] = static_cast<int32_t>(lengths[order[b].item<int64_t>()]);
    const int64_t used = (seq_lens[b] + page - 1) / page;
    table[b].narrow(0, 0, used).copy_(pages.narrow(0, next, used));
    next += used;
  }
  return {table.to(at::kInt), at::tensor(seq_lens, at::TensorOptions().dtype(at::kInt))};
}

}  // namespace d2k
