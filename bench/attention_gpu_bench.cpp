// kjit_attention_gpu_bench: flash_attention's TFLOP/s on FlashAttention-3's prefill protocol:
// 16k tokens in all as sequences of 1k, 4k and 16k, 16 heads of dim 128, bf16, causal and not,
// plus GQA 32/8 rows; each row for the wrapper's variant, its tunables' alternatives (the other
// PERSISTENT, key tiles of 64, a persistent walk with the other Q_BUFFERS, the other STAGE_O) and
// flash_attention_paged on the same k and v seen as a paged cache of 16- and 32-token pages in
// shuffled tables (chunked prefill's form, every key new), with its Q_BUFFERS and the other.
// KJIT_ATTENTION_BEFORE=<flash_attention.hip of an earlier version> adds a row for that source's
// kernel with the wrapper's parameters and STAGE_O 0 (a source from before STAGE_O gets it as a
// parameter it ignores), compiled in the same process as a template of its own: the same run's
// figure before a change.
// KJIT_ATTENTION_SEQLEN=<n> keeps the rows of that sequence length alone;
// KJIT_ATTENTION_VARIANTS=<name>,<name>... the variants of those names alone ("default,before").
// bench/python/attention_torch.py times torch's scaled_dot_product_attention backends on the same
// shapes; run both in one session to compare.
//
// FLOPs count as FlashAttention's do: 4 * tokens * seqlen * heads * head_dim, halved when causal.
// Each row is launched once to compile and warm up; then the median of 5 batches, each timed on
// the host from the first launch to the device's synchronisation, divided by its launches.
#include "kjit/kjit.hpp"
#include "kjit/ops/flash_attention.hpp"
#include "ops/src/flash_attention_variant.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace kjit;
using namespace kjit::ops;

DeviceBuffer random_bf16(const Device &device, std::size_t count, std::mt19937 &rng) {
  std::uniform_real_distribution<double> uniform(-1, 1);
  std::vector<BFloat16> host(count);
  for (BFloat16 &value : host)
    value = from_double<BFloat16>(uniform(rng));
  DeviceBuffer buffer = device.allocate(count * sizeof(BFloat16));
  buffer.write(host.data(), host.size() * sizeof(BFloat16));
  return buffer;
}

// The template of KJIT_ATTENTION_BEFORE's source, with flash_attention's parameters and options
// under a name of its own (so that plans and cache entries do not mix); null where unset.
std::unique_ptr<Template> before_template() {
  const char *path = std::getenv("KJIT_ATTENTION_BEFORE");
  if (!path || !*path)
    return nullptr;
  std::ifstream file(path);
  if (!file)
    throw Error(Errc::bad_argument, std::string("KJIT_ATTENTION_BEFORE: cannot read ") + path);
  std::stringstream read;
  read << file.rdbuf();
  std::string source = read.str();
  const std::string before_stage_o = "int PAGED, int Q_BUFFERS>";
  if (source.find("int STAGE_O") == std::string::npos &&
      source.find(before_stage_o) != std::string::npos)
    source.replace(source.find(before_stage_o), before_stage_o.size(),
                   "int PAGED, int Q_BUFFERS, int STAGE_O>");
  const Template &now = templates::find("flash_attention");
  return std::make_unique<Template>("flash_attention_before", source, now.params(),
                                    TemplateOptions{.kernel = now.kernel(),
                                                    .source_name = "flash_attention_before.hip",
                                                    .headers = now.headers(),
                                                    .include_dirs = now.include_dirs(),
                                                    .compile_options = now.compile_options(),
                                                    .arguments = now.arguments(),
                                                    .tuning = now.tuning(),
                                                    .targets = now.targets()});
}

} // namespace

int main() {
  try {
    Runtime rt;
    const std::unique_ptr<Template> before = before_template();
    const Device &device = rt.default_device();
    std::printf("device: %s (%s)\n", device.name().c_str(), device.target().id().c_str());
    std::printf("%-22s %-8s %-6s %-6s %-8s %10s %10s\n", "variant", "seqlen", "heads", "kv",
                "causal", "ms", "TFLOP/s");
    constexpr int tokens = 16384, head_dim = 128;
    struct Row {
      int seqlen, q_heads, kv_heads;
    };
    const char *only_seqlen = std::getenv("KJIT_ATTENTION_SEQLEN");
    const char *only_variants = std::getenv("KJIT_ATTENTION_VARIANTS");
    const auto wanted = [&](const std::string &name) {
      if (!only_variants || !*only_variants)
        return true;
      std::stringstream names(only_variants);
      for (std::string each; std::getline(names, each, ',');)
        if (each == name)
          return true;
      return false;
    };
    std::mt19937 rng(1);
    for (const Row row : {Row{1024, 16, 16}, {4096, 16, 16}, {16384, 16, 16}, {4096, 32, 8}})
      for (bool causal : {false, true}) {
        if (only_seqlen && *only_seqlen && std::atoi(only_seqlen) != row.seqlen)
          continue;
        const int batch = tokens / row.seqlen;
        std::vector<int> cu(batch + 1);
        for (int b = 0; b <= batch; ++b)
          cu[b] = b * row.seqlen;
        DeviceBuffer cu_device = device.allocate(cu.size() * sizeof(int));
        cu_device.write(cu.data(), cu.size() * sizeof(int));
        const std::size_t q_count = std::size_t(tokens) * row.q_heads * head_dim;
        const std::size_t k_count = std::size_t(tokens) * row.kv_heads * head_dim;
        DeviceBuffer q = random_bf16(device, q_count, rng), k = random_bf16(device, k_count, rng),
                     v = random_bf16(device, k_count, rng), out = device.allocate(q_count * 2);
        const AttentionShape shape{.batch = batch,
                                   .total_q = tokens,
                                   .total_k = tokens,
                                   .max_seqlen_q = row.seqlen,
                                   .q_heads = row.q_heads,
                                   .kv_heads = row.kv_heads,
                                   .head_dim = head_dim,
                                   .causal = causal,
                                   .scale = static_cast<float>(1 / std::sqrt(head_dim))};
        auto *out_data = static_cast<BFloat16 *>(out.data());
        const auto *q_data = static_cast<const BFloat16 *>(q.data());
        const auto *cu_data = static_cast<const int *>(cu_device.data());
        // The wrapper's variant and its tunables' alternatives.
        const ops::detail::ChosenVariant chosen =
            ops::detail::flash_attention_variant<BFloat16>(device.target(), shape);
        const int other_persistent = 1 - chosen.integer("PERSISTENT");
        const int other_q_buffers = 3 - chosen.integer("Q_BUFFERS");
        const int other_stage_o = 1 - chosen.integer("STAGE_O");
        std::vector<std::pair<std::string, ops::detail::ChosenVariant>> variants = {
            {"default", chosen},
            {"PERSISTENT=" + std::to_string(other_persistent), chosen},
            {"BLOCK_N=64", chosen},
            {"PERSISTENT=1 Q_BUFFERS=" + std::to_string(other_q_buffers), chosen},
            {"STAGE_O=" + std::to_string(other_stage_o), chosen}};
        variants[1].second.params.set("PERSISTENT", other_persistent);
        variants[2].second.params.set("BLOCK_N", 64);
        variants[3].second.params.set("PERSISTENT", 1);
        variants[3].second.params.set("Q_BUFFERS", other_q_buffers);
        variants[4].second.params.set("STAGE_O", other_stage_o);
        if (before) {
          ops::detail::ChosenVariant earlier{before.get(), chosen.params};
          earlier.params.set("STAGE_O", 0);
          variants.emplace_back("before", earlier);
        }
        std::vector<std::pair<std::string, std::function<void()>>> runs;
        for (const auto &entry : variants)
          runs.emplace_back(entry.first, [&, variant = entry.second] {
            ops::detail::launch_flash_attention<BFloat16>(
                rt, variant, out_data, q_data, static_cast<const BFloat16 *>(k.data()),
                static_cast<const BFloat16 *>(v.data()), cu_data, cu_data, shape);
          });
        // The same k and v as a paged cache ([tokens / page, page, kv_heads, 128]), each sequence's
        // pages in a shuffled order (the values a key meets differ, the work does not).
        std::vector<DeviceBuffer> table_buffers;
        const std::vector<int> lengths(batch, row.seqlen);
        DeviceBuffer lengths_device = device.allocate(lengths.size() * sizeof(int));
        lengths_device.write(lengths.data(), lengths.size() * sizeof(int));
        for (int page : {16, 32}) {
          std::vector<int> pages(tokens / page);
          std::iota(pages.begin(), pages.end(), 0);
          std::shuffle(pages.begin(), pages.end(), rng);
          table_buffers.push_back(device.allocate(pages.size() * sizeof(int)));
          table_buffers.back().write(pages.data(), pages.size() * sizeof(int));
          const PagedKvCache cache{.k = k.data(),
                                   .v = v.data(),
                                   .num_blocks = tokens / page,
                                   .page_size = page,
                                   .kv_heads = row.kv_heads,
                                   .head_dim = head_dim};
          const PagedPrefillBatch paged{.cu_seqlens_q = cu_data,
                                        .k_lens = static_cast<const int *>(lengths_device.data()),
                                        .block_tables =
                                            static_cast<const int *>(table_buffers.back().data()),
                                        .batch = batch,
                                        .max_blocks = row.seqlen / page,
                                        .total_q = tokens,
                                        .max_seqlen_q = row.seqlen};
          runs.emplace_back("paged " + std::to_string(page), [&, cache, paged] {
            flash_attention_paged<BFloat16>(rt, out_data, q_data, row.q_heads, cache, paged, causal,
                                            shape.scale);
          });
          // The wrapper's paged variant with the other Q_BUFFERS.
          ops::detail::ChosenVariant other =
              ops::detail::flash_attention_paged_variant<BFloat16>(shape, page);
          other.params.set("Q_BUFFERS", 3 - other.integer("Q_BUFFERS"));
          runs.emplace_back("paged " + std::to_string(page) +
                                " Q_BUFFERS=" + std::to_string(other.integer("Q_BUFFERS")),
                            [&, cache, paged, other] {
                              ops::detail::launch_flash_attention_paged<BFloat16>(
                                  rt, other, out_data, q_data, row.q_heads, cache, paged, causal,
                                  shape.scale);
                            });
        }
        for (const auto &[name, run] : runs) {
          if (!wanted(name))
            continue;
          run();
          device.synchronize();
          const double flops =
              4.0 * tokens * row.seqlen * row.q_heads * head_dim / (causal ? 2.0 : 1.0);
          // About 0.2 s per batch at 500 TFLOP/s.
          const int launches = std::max(1, static_cast<int>(1e14 / flops));
          std::vector<double> batches;
          for (int i = 0; i < 5; ++i) {
            const auto start = std::chrono::steady_clock::now();
            for (int l = 0; l < launches; ++l)
              run();
            device.synchronize();
            batches.push_back(
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count() /
                launches);
          }
          std::sort(batches.begin(), batches.end());
          const double ms = batches[2];
          std::printf("%-22s %-8d %-6d %-6d %-8s %10.4f %10.1f\n", name.c_str(), row.seqlen,
                      row.q_heads, row.kv_heads, causal ? "yes" : "no", ms, flops / ms / 1e9);
        }
      }
  } catch (const Error &error) {
    std::fprintf(stderr, "%s\n", error.summary().c_str());
    return 1;
  }
}
