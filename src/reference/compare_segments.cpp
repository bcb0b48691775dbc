#include "reference/compare_segments.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"
#include "reference/tensors.hpp"

namespace d2k {
namespace {

struct Segment {
  int64_t begin = 0;
  int64_t end = 0;  // one past the last element
  int64_t label = 0;
};

std::string where(const Segment& s) {
  return fmt::format("the segment labelled {} (positions {}..{})", s.label, s.begin, s.end - 1);
}

// The maximal runs of blocks labelled alike, over the first n elements.
std::vector<Segment> segments_of(const int64_t* labels, int64_t n, int64_t block) {
  std::vector<Segment> segments;
  for (int64_t b = 0; b * block < n; ++b) {
    const int64_t begin = b * block, end = std::min(n, begin + block);
    if (!segments.empty() && segments.back().label == labels[b]) segments.back().end = end;
    else segments.push_back({begin, end, labels[b]});
  }
  return segments;
}

// The first problem of each kind, by position; the message names the most telling one.
struct Problems {
  std::optional<int64_t> unknown, repeated, displaced, pad_misplaced;
  std::optional<int64_t> missing_value;
  int64_t bad_positions = 0;
  int64_t missing = 0;
};

}  // namespace

Comparison compare_segments(const std::string& name, const at::Tensor& got_in, const at::Tensor& want_in,
                            const at::Tensor& labels_in, int64_t block, int64_t pad) {
  if (got_in.sizes() != want_in.sizes() || got_in.dim() != 1)
    fail("comparing '{}' as segments: needs two 1-D tensors of one length, got shapes {} and {}", name,
         c10::str(got_in.sizes()), c10::str(want_in.sizes()));
  if (at::isFloatingType(got_in.scalar_type()) || at::isFloatingType(want_in.scalar_type()))
    fail("comparing '{}' as segments: needs integer tensors, got {} and {}", name, c10::toString(got_in.scalar_type()),
         c10::toString(want_in.scalar_type()));
  const int64_t n = got_in.numel();
  if (block < 1) fail("comparing '{}' as segments: block {} must be at least 1", name, block);
  if (labels_in.numel() * block < n)
    fail("comparing '{}' as segments: {} labels of blocks of {} cover {} of its {} elements", name, labels_in.numel(),
         block, labels_in.numel() * block, n);

  const auto got_t = widen(got_in), want_t = widen(want_in), labels_t = widen(labels_in);
  const int64_t* got = got_t.data_ptr<int64_t>();
  const int64_t* want = want_t.data_ptr<int64_t>();
  const auto segments = segments_of(labels_t.data_ptr<int64_t>(), n, block);

  // Where each of the oracle's entries belongs, and how often the solution wrote it.
  std::unordered_map<int64_t, int64_t> segment_of;  // entry -> index into segments
  std::vector<int64_t> segment_at(n);
  for (std::size_t s = 0; s < segments.size(); ++s) {
    for (int64_t i = segments[s].begin; i < segments[s].end; ++i) {
      segment_at[i] = static_cast<int64_t>(s);
      if (want[i] == pad) continue;
      if (!segment_of.emplace(want[i], s).second)
        fail("comparing '{}' as segments: the oracle holds {} twice (at {} and more)", name, want[i], i);
    }
  }
  std::unordered_map<int64_t, int64_t> written;
  written.reserve(segment_of.size());

  Problems p;
  for (int64_t i = 0; i < n; ++i) {
    bool bad = false;
    const auto note = [&](std::optional<int64_t>& first) {
      if (!first) first = i;
      bad = true;
    };
    if ((got[i] == pad) != (want[i] == pad)) note(p.pad_misplaced);
    if (got[i] != pad) {
      const auto home = segment_of.find(got[i]);
      if (home == segment_of.end()) note(p.unknown);
      else if (home->second != segment_at[i]) note(p.displaced);
      if (++written[got[i]] == 2) note(p.repeated);  // its second appearance
      else if (written[got[i]] > 2) bad = true;
    }
    if (bad) ++p.bad_positions;
  }
  for (const auto& [entry, s] : segment_of) {
    if (written.count(entry)) continue;
    ++p.missing;
    if (!p.missing_value || entry < *p.missing_value) p.missing_value = entry;
  }

  Comparison result;
  result.name = name;
  result.metric = "segments";
  result.elements = n;
  result.mismatches = p.bad_positions;
  result.passed = p.bad_positions == 0 && p.missing == 0;
  if (result.passed) return result;

  const auto at_position = [&](int64_t i) {
    result.worst_index = i;
    result.worst_got = static_cast<double>(got[i]);
    result.worst_want = static_cast<double>(want[i]);
  };
  if (p.unknown) {
    const int64_t i = *p.unknown;
    at_position(i);
    result.detail = fmt::format("position {} holds {}, which is neither an entry of the oracle's nor the pad {}", i,
                                got[i], pad);
  } else if (p.repeated) {
    const int64_t i = *p.repeated;
    at_position(i);
    result.detail = fmt::format("entry {} appears {} times (again at position {}); every entry belongs exactly once",
                                got[i], written[got[i]], i);
  } else if (p.missing_value) {
    const auto& home = segments[segment_of.at(*p.missing_value)];
    at_position(home.begin);
    result.detail = fmt::format("entry {} is missing ({} of the oracle's entries are); it belongs to {}", *p.missing_value,
                                p.missing, where(home));
  } else if (p.displaced) {
    const int64_t i = *p.displaced;
    at_position(i);
    result.detail = fmt::format("position {} holds entry {}, which belongs to {}, not to {}", i, got[i],
                                where(segments[segment_of.at(got[i])]), where(segments[segment_at[i]]));
  } else {
    const int64_t i = *p.pad_misplaced;
    at_position(i);
    const auto& s = segments[segment_at[i]];
    const auto entries = std::count_if(want + s.begin, want + s.end, [&](int64_t v) { return v != pad; });
    result.detail = got[i] == pad
                        ? fmt::format("position {} holds the pad {} where the oracle holds an entry of {} ({} entries)", i,
                                      pad, where(s), entries)
                        : fmt::format("position {} holds {} where the oracle holds the pad {} ({} has {} entries)", i,
                                      got[i], pad, where(s), entries);
  }
  result.detail += fmt::format("; {} of {} positions wrong", p.bad_positions, n);
  return result;
}

}  // namespace d2k
