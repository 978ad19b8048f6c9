// `berth sim packing`: the FGD paper's packing protocol over an openb trace, one or several
// policies side by side on the same seeds; a table on the terminal, JSON and an SVG chart.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string_view>

#include "cli/commands.h"
#include "cli/data_dir.h"
#include "cli/policy_argument.h"
#include "config/berth_trace.h"
#include "config/config_error.h"
#include "config/limits.h"
#include "config/openb_node_list.h"
#include "config/openb_pod_list.h"
#include "config/tiresias_trace.h"
#include "core/job.h"
#include "sim/chart.h"
#include "sim/packing.h"
#include "sim/packing_bound.h"
#include "sim/replay.h"
#include "sim/report.h"
#include "sim/synthetic_trace.h"
#include "sim/trace.h"
#include "sim/workload_variants.h"

namespace berth {
namespace {

// A whole number from 0 to 2^64-1, nothing else ("42abc", "1.9", "-1" and "" are not).
bool ParseSeed(std::string_view text, uint64_t* seed) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *seed);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

// --seed's check. CLI11's own conversion to uint64_t takes "-1", "0x10" and " 7" and saturates
// past 2^64-1, so the text is held to ParseSeed's digits first.
CLI::Validator SeedText() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t seed = 0;
        if (ParseSeed(text, &seed)) return "";
        return "Value \"" + text +
               "\" is not a seed: expected a whole number from 0 to 18446744073709551615, "
               "in decimal digits only, like 42";
      },
      "UINT64");
}

// "42-51" or "1,2,3" (or both, "1,5-8"): distinct seeds, at most the seeds bound.
std::vector<uint64_t> ParseSeeds(const std::string& text) {
  std::vector<uint64_t> seeds;
  std::set<uint64_t> seen;
  std::string_view rest = text;
  while (true) {
    const std::string_view part = rest.substr(0, rest.find(','));
    const size_t dash = part.find('-');
    uint64_t first = 0, last = 0;
    if (!ParseSeed(part.substr(0, dash), &first) ||
        !ParseSeed(dash == std::string_view::npos ? part : part.substr(dash + 1), &last) ||
        last < first)
      throw ConfigError(
          "--seeds: expected whole numbers from 0 to 18446744073709551615 and "
          "rising ranges, like 42-51 or 1,2,3, got \"" +
          std::string(part) + "\"");
    // Counted before the loop, which stops at `last` itself so that 2^64-1 cannot wrap.
    if (last - first >= static_cast<uint64_t>(limits::Get().seeds) - seeds.size())
      throw ConfigError("--seeds: " + limits::OverLimit(&limits::Limits::seeds, "seeds"));
    for (uint64_t s = first;; ++s) {
      if (!seen.insert(s).second)
        throw ConfigError("--seeds: seed " + std::to_string(s) + " is given twice");
      seeds.push_back(s);
      if (s == last) break;
    }
    if (part.size() == rest.size()) return seeds;
    rest.remove_prefix(part.size() + 1);
  }
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  std::string file = slash == std::string::npos ? path : path.substr(slash + 1);
  return file.substr(0, file.find_last_of('.'));
}

// Prints "label: NN% (N pods/s)" over itself on a terminal; silent otherwise.
class Progress {
 public:
  explicit Progress(std::string label) : label_(std::move(label)), tty_(isatty(2)) {}
  void operator()(double fraction, double pods) {
    if (!tty_) return;
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (s - last_ < 0.2 && fraction < 1) return;
    last_ = s;
    std::cerr << "\r  " << label_ << ": " << std::setw(3) << static_cast<int>(100 * fraction)
              << "% (" << static_cast<long>(s > 0 ? pods * fraction / s : 0) << " pods/s)   "
              << std::flush;
  }
  void Done() {
    if (tty_) std::cerr << "\r" << std::string(60, ' ') << "\r";
  }

 private:
  std::string label_;
  bool tty_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double last_ = -1;
};

// An output file named by `flag`, opened (and emptied) before the work: a path that cannot be
// written is refused at once, not after a long run. nullptr when no path is given.
std::unique_ptr<std::ofstream> OpenOutput(const char* flag, const std::string& path) {
  if (path.empty()) return nullptr;
  auto out = std::make_unique<std::ofstream>(path);
  if (!*out)
    throw ConfigError(std::string(flag) + ": cannot write " + path + ": " + std::strerror(errno) +
                      "; give a file in a writable directory");
  return out;
}

// Writes `text` to an output OpenOutput opened.
void WriteOutput(std::ofstream& out, const char* flag, const std::string& path,
                 const std::string& text) {
  out << text;
  out.close();
  if (!out) throw ConfigError(std::string(flag) + ": cannot write " + path);
}

struct PackingArgs {
  // The bundled openb trace; "" when it is found in none of DataDirs().
  std::string nodes = FindDataFile("openb/openb_node_list_gpu_node.csv");
  std::string pods = FindDataFile("openb/openb_pod_list_default.csv");
  std::string policies = "fgd", seeds = "42-51", json, svg, variant;
  double tune = 1.3;
  int candidates = 0;
  bool skip_malformed = false, bound = false;
};

void RequireTrace(const std::string& nodes, const std::string& pods) {
  if (nodes.empty() || pods.empty()) {
    std::string dirs;
    for (const std::string& d : DataDirs()) dirs += (dirs.empty() ? "" : ", ") + d;
    throw ConfigError("the bundled openb trace (openb/) is in none of " + dirs +
                      "; give --nodes and --pods");
  }
}

std::string MixText(const WorkloadMix& m) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(1) << m.pods << " pods asking " << m.gpus
    << " GPUs; of the GPU milli " << m.multi_gpu << "% multi-GPU, " << m.gpu_share
    << "% shared-GPU; " << m.gpu_spec << "% of GPU pods model-bound; CPU-only pods' CPU "
    << m.cpu_only_cpu << "% of GPU pods'";
  return o.str();
}

void RunSimPacking(const PackingArgs& a) {
  RequireTrace(a.nodes, a.pods);
  const Cluster cluster = LoadOpenbNodeList(a.nodes);  // refuses a cluster without GPUs
  int skipped = 0;
  std::vector<TracePod> pods = LoadOpenbPodList(a.pods, a.skip_malformed ? &skipped : nullptr);
  if (skipped) std::cerr << "skipped " << skipped << " malformed rows of " << a.pods << "\n";
  if (pods.empty()) throw ConfigError(a.pods + ":1: no rows after the header");
  std::string trace = BaseName(a.pods);
  if (!a.variant.empty()) {
    WorkloadVariant v;
    std::string error;
    if (!ParseWorkloadVariant(a.variant, &v, &error)) throw ConfigError("--variant: " + error);
    pods = MakeWorkloadVariant(pods, cluster, v);
    trace += "+" + v.Name();
    std::cout << "variant " << v.Name() << " (" << (v.held_out() ? "held out" : "tuning")
              << "): " << MixText(MeasureWorkloadMix(pods)) << "\n";
  }
  const std::vector<uint64_t> seeds = ParseSeeds(a.seeds);
  if (!(a.tune >= 0.01 && a.tune <= 3))
    throw ConfigError("--tune: expected a factor from 0.01 to 3, got " + NumberText(a.tune));
  // The trace is inflated with copies of its pods until it asks for `tune` times the GPUs:
  // bounded only when some pod asks for GPUs, and as long as the mean pod is small.
  double gpu_milli = 0;
  for (const TracePod& p : pods) gpu_milli += static_cast<double>(p.gpus) * p.gpu_milli;
  if (gpu_milli == 0)
    throw ConfigError(a.pods + ":" + std::to_string(pods.front().line) +
                      ": column 'num_gpu': no pod asks for GPUs, this first one nor any after it; "
                      "packing measures GPU allocation");
  // A trace no pod of which any node can hold would print a table of zeros.
  std::string why_not;
  const bool any_fits = std::any_of(pods.begin(), pods.end(), [&](const TracePod& p) {
    TaskGroup one;
    one.demand = TraceDemand(p);
    const std::string why = WhyNoNodeFits(cluster, one);
    if (why_not.empty()) why_not = p.name + ": " + why;
    return why.empty();
  });
  if (!any_fits)
    throw ConfigError(a.pods + ": no pod fits any node of " + a.nodes + "; the first, " + why_not);
  const double inflated = a.tune * 1000.0 * cluster.gpu_count() / (gpu_milli / pods.size());
  if (inflated > static_cast<double>(limits::Get().packing_pods))
    throw ConfigError("--tune: the trace inflated to " + NumberText(a.tune) +
                      " times the cluster would be about " +
                      std::to_string(std::llround(inflated)) + " pods, " +
                      limits::OverLimit(&limits::Limits::packing_pods, "pods") +
                      "; lower --tune or use a smaller node list");
  std::vector<Policy> policies = LoadPolicyList(a.policies);
  for (Policy& p : policies) p.candidates = a.candidates;

  const auto json_out = OpenOutput("--json", a.json);
  const auto svg_out = OpenOutput("--svg", a.svg);
  std::vector<PackingResult> results;
  const auto start = std::chrono::steady_clock::now();
  for (const Policy& p : policies) {
    Progress progress(p.name);
    const double total_pods = static_cast<double>(pods.size() * seeds.size()) * a.tune;
    results.push_back(
        RunPacking(cluster, pods, p, seeds, a.tune, [&](double f) { progress(f, total_pods); }));
    progress.Done();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const int points = static_cast<int>(results[0].mean.alloc_ratio.size()) - 1;
  std::cout << "trace " << trace << ": " << pods.size() << " pods on " << cluster.gpu_count()
            << " GPUs, " << seeds.size() << " seed(s), " << std::fixed << std::setprecision(1)
            << seconds << " s\n";
  std::cout << "GPU allocation ratio (%) by arrived workload (%):\n";
  std::cout << std::left << std::setw(16) << "policy" << std::right;
  const std::vector<int> columns = {50, 80, 90, 100, 110, 120, 130};
  for (int c : columns)
    if (c <= points) std::cout << std::setw(8) << c;
  std::cout << std::setw(10) << "frag@end" << std::setw(14) << "unalloc GPUs\n";
  for (const PackingResult& r : results) {
    std::cout << std::left << std::setw(16) << r.policy << std::right << std::setprecision(2);
    for (int c : columns)
      if (c <= points) std::cout << std::setw(8) << r.mean.alloc_ratio[c];
    std::cout << std::setw(10) << r.mean.frag_amount[points] << std::setw(11)
              << std::setprecision(1) << r.unallocated_gpus_at_end << "\n";
  }
  // Which pods a policy gives up on: where one policy beats another.
  std::cout << "GPUs asked by the pods turned away, by kind (mean over seeds):\n"
            << std::left << std::setw(16) << "policy" << std::right << std::setw(11) << "multi-GPU"
            << std::setw(11) << "one GPU" << std::setw(11) << "GPU share\n";
  for (const PackingResult& r : results) {
    std::cout << std::left << std::setw(16) << r.policy << std::right << std::setprecision(1);
    for (double d : r.mean.dropped_gpus) std::cout << std::setw(11) << d;
    std::cout << "\n";
  }

  // Against fgd before the cluster is full: a policy that wins at the end may still turn pods
  // away earlier than fgd (docs/simulator.md). The lowest policy - fgd over 1..99% arrived.
  const PackingResult* fgd = nullptr;
  for (const PackingResult& r : results)
    if (r.policy == "fgd") fgd = &r;
  std::map<std::string, std::pair<double, int>> lowest_vs_fgd;  // policy: (points, at %)
  if (fgd != nullptr && results.size() > 1 && points > 1) {
    std::cout << "against fgd before 100% arrived: the lowest policy - fgd, and where:\n"
              << std::left << std::setw(16) << "policy" << std::right << std::setw(8) << "lowest"
              << std::setw(8) << "at %\n";
    for (const PackingResult& r : results) {
      if (&r == fgd) continue;
      std::pair<double, int> low{0, 0};
      for (int x = 1; x <= std::min(99, points); ++x) {
        const double d = r.mean.alloc_ratio[x] - fgd->mean.alloc_ratio[x];
        if (low.second == 0 || d < low.first) low = {d, x};
      }
      if (low.first >= 0) low.second = 0;  // never behind
      lowest_vs_fgd[r.policy] = low;
      std::cout << std::left << std::setw(16) << r.policy << std::right << std::setprecision(2)
                << std::setw(8) << low.first << std::setw(7)
                << (low.second > 0 ? std::to_string(low.second) : "-") << "\n";
    }
  }

  // The best packing of the same arrivals, at 100% arrived and at the end.
  nlohmann::json reference;
  if (a.bound) {
    std::vector<int> at;
    for (int x : {100, points})
      if (x <= points && (at.empty() || at.back() != x)) at.push_back(x);
    const PackingReference ref = RunPackingReference(cluster, pods, seeds, a.tune, at);
    std::cout << "\nthe best packing of the same arrivals, GPU allocation (%) by arrived workload "
                 "(%):\n"
              << std::left << std::setw(16) << "" << std::right;
    for (int x : at) std::cout << std::setw(8) << x;
    std::cout << "\n";
    auto row = [&](const std::string& name, const std::vector<double>& v, const std::string& note) {
      std::cout << std::left << std::setw(16) << name << std::right << std::setprecision(2);
      for (double d : v) std::cout << std::setw(8) << d;
      std::cout << "  " << note << "\n";
    };
    for (const PackingResult& r : results) {
      std::vector<double> v;
      for (int x : at) v.push_back(r.mean.alloc_ratio[x]);
      row(r.policy, v, "");
    }
    row("offline best", ref.offline_best,
        "a packing with full knowledge (" + ref.offline_heuristic.back() +
            "): the best is at least this");
    row("upper bound", ref.upper_bound, "fluid over node shapes: no policy allocates more");
    nlohmann::json upper, offline, heuristic, closed;
    for (size_t i = 0; i < at.size(); ++i) {
      upper[std::to_string(at[i])] = ref.upper_bound[i];
      offline[std::to_string(at[i])] = ref.offline_best[i];
      heuristic[std::to_string(at[i])] = ref.offline_heuristic[i];
    }
    if (fgd) {
      // (policy - fgd) / (reference - fgd): "-" where the reference is less than 0.1 point above
      // fgd, where the share would only magnify noise.
      std::cout << "share of fgd's gap closed (%), to the offline best | to the upper bound:\n";
      for (const PackingResult& r : results) {
        if (&r == fgd) continue;
        std::cout << std::left << std::setw(16) << r.policy << std::right << std::setprecision(1);
        for (const auto* refs : {&ref.offline_best, &ref.upper_bound}) {
          const char* key = refs == &ref.offline_best ? "offline_best" : "upper_bound";
          for (size_t i = 0; i < at.size(); ++i) {
            const double base = fgd->mean.alloc_ratio[at[i]];
            const double gap = (*refs)[i] - base;
            nlohmann::json& cell = closed[r.policy][key][std::to_string(at[i])];
            if (gap >= 0.1) {
              cell = 100 * (r.mean.alloc_ratio[at[i]] - base) / gap;
              std::cout << std::setw(8) << cell.get<double>();
            } else {
              std::cout << std::setw(8) << "-";
            }
          }
          if (refs == &ref.offline_best) std::cout << "  |";
        }
        std::cout << "\n";
      }
    }
    reference = {{"upper_bound", upper},
                 {"offline_best", offline},
                 {"offline_heuristic", heuristic},
                 {"gap_closed_vs_fgd", closed}};
  }

  if (!a.json.empty()) {
    nlohmann::json j;
    j["trace"] = trace;
    if (!reference.is_null()) j["reference"] = reference;
    j["gpus"] = cluster.gpu_count();
    j["seeds"] = seeds;
    j["tune"] = a.tune;
    for (const PackingResult& r : results) {
      nlohmann::json alloc, frag;
      for (int x = 0; x <= points; ++x) {
        alloc[std::to_string(x)] = r.mean.alloc_ratio[x];
        frag[std::to_string(x)] = r.mean.frag_amount[x];
      }
      j["policies"][r.policy] = {
          {"seeds", r.seeds.size()},
          {"alloc_ratio", alloc},
          {"frag_amount", frag},
          {"unallocated_gpus_" + std::to_string(points), r.unallocated_gpus_at_end},
          {"dropped_gpus",
           {{"multi_gpu", r.mean.dropped_gpus[0]},
            {"one_gpu", r.mean.dropped_gpus[1]},
            {"gpu_share", r.mean.dropped_gpus[2]}}}};
      if (const auto low = lowest_vs_fgd.find(r.policy); low != lowest_vs_fgd.end())
        j["policies"][r.policy]["lowest_vs_fgd_below_100"] = {
            {"points", low->second.first},
            {"at", low->second.second > 0 ? nlohmann::json(low->second.second) : nullptr}};
    }
    WriteOutput(*json_out, "--json", a.json, JsonText(j) + "\n");
  }
  if (!a.svg.empty()) {
    std::vector<ChartSeries> series;
    for (const PackingResult& r : results) {
      ChartSeries s{r.policy, {}};
      for (int x = 0; x <= points; ++x) s.points.push_back({x, r.mean.alloc_ratio[x]});
      series.push_back(std::move(s));
    }
    ChartOptions o;
    o.title = "GPU allocation ratio on " + trace;
    o.x_label = "arrived workload (% of GPU capacity)";
    o.y_label = "GPUs allocated (%)";
    o.y_min = 0;
    o.y_max = 100;
    // Where the policies differ: the top of the curves.
    ChartOptions zoom = o;
    zoom.title += ", zoomed on 85-100% allocated";
    zoom.y_min = 85;
    WriteOutput(*svg_out, "--svg", a.svg, LineChartPanelsSvg(series, {o, zoom}));
  }
}

struct VariantsArgs {
  std::string nodes = FindDataFile("openb/openb_node_list_gpu_node.csv");
  std::string pods = FindDataFile("openb/openb_pod_list_default.csv");
};

void RunSimVariants(const VariantsArgs& a) {
  RequireTrace(a.nodes, a.pods);
  const Cluster cluster = LoadOpenbNodeList(a.nodes);
  const std::vector<TracePod> pods = LoadOpenbPodList(a.pods, nullptr);
  std::cout << "base: " << BaseName(a.pods) << ", " << MixText(MeasureWorkloadMix(pods)) << "\n";
  for (const WorkloadVariant& v : StandardVariants())
    std::cout << std::left << std::setw(16) << v.Name() << std::setw(10)
              << (v.held_out() ? "held out" : "tuning") << " "
              << MixText(MeasureWorkloadMix(MakeWorkloadVariant(pods, cluster, v))) << "\n";
}

// --load above this asks for ten times the cluster: a queue that never drains.
constexpr double kMaxLoad = 10;
// Below it, arrivals spread over more than the seconds bound: a replay of nothing.
constexpr double kMinLoad = 0.01;

struct ReplayArgs {
  std::string cluster, trace, format = "synthetic", vcs, policies = "berth", json, report;
  int jobs = 1000;
  double load = 0.9;
  uint64_t seed = 1;
  double checkpoint_s = 1800;
  bool checkpoint_given = false;  // else the default, lowered to a lower seconds bound
  bool sjf = false, skip_malformed = false;
};

// What a run did, job by job and queue by queue, for checking a scenario from the file alone.
nlohmann::json OutcomesJson(const Cluster& cluster, const ReplayResult& r) {
  auto time = [](double t) { return t < 0 ? nlohmann::json(nullptr) : nlohmann::json(t); };
  nlohmann::json jobs = nlohmann::json::array();
  for (const JobOutcome& o : r.jobs) {
    nlohmann::json runs = nlohmann::json::array();
    for (const JobRun& run : o.runs) {
      nlohmann::json replicas = nlohmann::json::array();
      for (const ReplicaPlacement& p : run.placements) {
        const Node& node = cluster.nodes[p.node];
        replicas.push_back({{"node", node.name}, {"rack", node.rack}, {"gpus", p.gpus}});
      }
      runs.push_back({{"start", run.start},
                      {"replicas", replicas},
                      {"told_to_stop", time(run.told_to_stop)},
                      {"stop", time(run.stop)},
                      {"stop_kind", run.stop_kind},
                      {"reason", run.reason}});
    }
    jobs.push_back({{"name", o.name},
                    {"queue", o.queue},
                    {"user", o.user},
                    {"submit", o.submit},
                    {"first_start", time(o.first_start)},
                    {"end", time(o.end)},
                    {"end_kind", o.end_kind},
                    {"refused", o.refused},
                    {"preemptions", o.preemptions},
                    {"evictions", o.evictions},
                    {"grows", o.grows},
                    {"shrinks", o.shrinks},
                    {"guaranteed_wait_s", o.guaranteed_wait_s},
                    {"anomaly", o.anomaly},
                    {"runs", runs}});
  }
  nlohmann::json queues;
  for (size_t q = 0; q < r.queues.size(); ++q) {
    nlohmann::json series = nlohmann::json::array();
    for (const QueuePoint& p : r.queue_timeline[q])
      series.push_back({{"time", p.time},
                        {"usage_gpus", p.usage_gpus},
                        {"fair_share_gpus", p.fair_share_gpus},
                        {"pending", p.pending}});
    queues[r.queues[q]] = series;
  }
  return {{"jobs", jobs}, {"queues", queues}};
}

// Jobs that no node of the cluster could ever hold wait to the end and leave nothing in the
// table but zeros; the engine's own test (WhyJobNeverFits) finds them before the replay runs.
// Some of them: a warning; all of them: nothing to measure, so a refusal.
void CheckJobsCanFit(const ReplayArgs& a, const Cluster& cluster,
                     const std::vector<ReplayJob>& jobs) {
  size_t never = 0;
  std::string first;
  const ReplayJob* first_job = nullptr;
  for (const ReplayJob& j : jobs)
    if (std::string why = WhyJobNeverFits(cluster, j.spec); !why.empty() && never++ == 0) {
      first = j.spec.name + ": " + why;
      first_job = &j;
    }
  if (never == 0) return;
  const std::string trace = a.trace.empty() ? "the " + a.format + " trace" : a.trace;
  const std::string on = a.cluster.empty() ? "the default cluster" : a.cluster;
  // The refusal names the first job's line: where the operator starts looking.
  std::string where = trace;
  if (first_job->line > 0)
    where += ":" + std::to_string(first_job->line) +
             (first_job->column > 0 ? ":" + std::to_string(first_job->column) : "");
  if (never == jobs.size())
    throw ConfigError(where + ": none of its " + std::to_string(jobs.size()) +
                      " jobs can ever fit on " + on + "; the first, " + first +
                      ". Give a cluster whose nodes can hold the jobs (--cluster) or change the "
                      "trace");
  std::cerr << "berth: warning: " << never << " of " << jobs.size() << " jobs of " << trace
            << " can never fit on " << on
            << " and wait to the end (never_fit in --json); the first, " << first << "\n";
}

void RunSimReplay(const ReplayArgs& a) {
  // NaN fails every comparison, so each range is written to accept rather than to refuse.
  if (!(a.load >= kMinLoad && a.load <= kMaxLoad))
    throw ConfigError(
        "--load: expected a number from 0.01 to 10 (mean GPU demand over capacity), got " +
        NumberText(a.load));
  // `--limit seconds=1` alone blamed a --checkpoint never given: only a given one is refused.
  const double checkpoint_s =
      a.checkpoint_given ? a.checkpoint_s : std::min(a.checkpoint_s, limits::Seconds());
  if (!(checkpoint_s > 0 && checkpoint_s <= limits::Seconds()))
    throw ConfigError("--checkpoint: expected seconds above 0 and at most " +
                      std::to_string(limits::Get().seconds) + ", got " + NumberText(checkpoint_s));
  const std::vector<Policy> policies = LoadPolicyList(a.policies);
  const Cluster cluster = LoadClusterArgument(a.cluster);
  std::vector<QueueSpec> queues = LoadVcQueues(a.vcs);
  std::vector<ReplayJob> jobs;
  std::vector<ReplayEvent> events;
  int skipped = 0;
  int* skip = a.skip_malformed ? &skipped : nullptr;
  if (a.format == "berth") {
    if (a.trace.empty()) throw ConfigError("--trace: required with --format berth");
    BerthTrace trace = LoadBerthTrace(a.trace, cluster, queues);
    queues = std::move(trace.queues);
    jobs = std::move(trace.jobs);
    events = std::move(trace.events);
  } else {
    if (queues.empty()) queues.push_back({"default", 1, -1, {}});
    if (a.format == "synthetic") {
      if (!a.trace.empty())
        throw ConfigError(
            "--trace: a synthetic replay makes its own jobs; give --format berth, "
            "openb or tiresias to replay " +
            a.trace);
      SyntheticOptions o;
      o.jobs = a.jobs;
      o.load = a.load;
      o.seed = a.seed;
      jobs = SyntheticJobs(cluster, queues, o);
    } else if (a.format == "openb" || a.format == "tiresias") {
      if (a.trace.empty()) throw ConfigError("--trace: required with --format " + a.format);
      const std::vector<TracePod> pods =
          a.format == "openb" ? LoadOpenbPodList(a.trace, skip) : LoadTiresiasJobs(a.trace, skip);
      if (pods.empty()) throw ConfigError(a.trace + ":1: no rows after the header");
      jobs = ReplayJobsFromTrace(cluster, pods, queues);
      if (jobs.empty())
        throw ConfigError(a.trace + ":" + std::to_string(pods.front().line) +
                          ": no pod has both a submit time and a duration (or start and end "
                          "times), this first one nor any after it; a replay needs them");
      if (jobs.size() < pods.size())
        std::cerr << "berth: " << pods.size() - jobs.size() << " of " << pods.size() << " pods of "
                  << a.trace << " have no submit time or no duration and are not replayed\n";
    } else {
      throw ConfigError("--format: expected berth, openb, tiresias or synthetic, got \"" +
                        a.format + "\"");
    }
  }
  if (skipped) std::cerr << "skipped " << skipped << " malformed rows of " << a.trace << "\n";
  CheckJobsCanFit(a, cluster, jobs);
  ReplayOptions options;
  options.shortest_first = a.sjf;
  options.checkpoint_interval_s = checkpoint_s;
  const auto json_out = OpenOutput("--json", a.json);
  const auto report_out = OpenOutput("--report", a.report);
  std::vector<ReplayResult> results;
  const auto start = std::chrono::steady_clock::now();
  for (const Policy& policy : policies) {
    Progress progress(policy.name);
    results.push_back(RunReplay(cluster, queues, jobs, events, policy, options,
                                [&](double f) { progress(f, static_cast<int>(jobs.size())); }));
    progress.Done();
    const ReplayResult& r = results.back();
    // The cluster alone passed the engine's checks on load, and guarantees name their file and
    // line (VcGuarantee::where): what is left names its own place.
    if (!r.error.empty()) throw ConfigError(r.error);
    for (const JobOutcome& o : r.jobs)
      if (!o.refused.empty()) {
        std::cerr << "berth: warning: policy " << policy.name << ": " << r.refused
                  << " job(s) refused at submit; the first, " << o.name << ": " << o.refused
                  << "\n";
        break;
      }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "replay: " << jobs.size() << " jobs on " << cluster.gpu_count() << " GPUs, "
            << queues.size() << " queue(s), " << std::fixed << std::setprecision(1) << seconds
            << " s\n";
  // Each column is its width less one, after a space: a figure too wide for its column (a
  // replay of years, a long policy name) pushes the row right instead of running into the next.
  const auto column = [](int width) {
    return [width](auto value) {
      std::ostringstream text;
      text << std::fixed << std::setprecision(2) << value;
      std::ostringstream cell;
      cell << ' ' << std::setw(width - 1) << text.str();
      return cell.str();
    };
  };
  const auto name = [](const std::string& text) {
    std::ostringstream cell;
    cell << std::left << std::setw(15) << text << ' ';
    return cell.str();
  };
  const auto wide = column(11), mid = column(9), makespan = column(10), util = column(7);
  std::cout << name("policy") << wide("JCT mean") << mid("p50") << mid("p95") << mid("p99")
            << wide("wait mean") << makespan("makespan") << util("util") << mid("preempt")
            << mid("anomaly") << "   (hours, %)\n";
  for (const ReplayResult& r : results) {
    std::ostringstream utilization;
    utilization << std::fixed << std::setprecision(1) << r.mean_utilization;
    std::cout << name(r.policy) << wide(r.jct.mean / 3600) << mid(r.jct.p50 / 3600)
              << mid(r.jct.p95 / 3600) << mid(r.jct.p99 / 3600) << wide(r.wait.mean / 3600)
              << makespan(r.makespan / 3600) << util(utilization.str()) << mid(r.preemptions)
              << mid(r.anomalies) << "\n";
  }
  if (!a.json.empty()) {
    nlohmann::json j;
    j["jobs"] = jobs.size();
    j["gpus"] = cluster.gpu_count();
    auto dist = [](const Distribution& d) {
      return nlohmann::json{{"mean", d.mean}, {"p50", d.p50}, {"p95", d.p95}, {"p99", d.p99}};
    };
    for (const ReplayResult& r : results) {
      nlohmann::json per_queue;
      for (const auto& [q, d] : r.per_queue)
        per_queue[q] = {{"jct_s", dist(d.first)}, {"wait_s", dist(d.second)}};
      j["policies"][r.policy] = {{"jct_s", dist(r.jct)},
                                 {"wait_s", dist(r.wait)},
                                 {"makespan_s", r.makespan},
                                 {"utilization_percent", r.mean_utilization},
                                 {"utilization_window_s", {r.utilization_from, r.utilization_to}},
                                 {"preemptions", r.preemptions},
                                 {"evictions", r.evictions},
                                 {"kills", r.kills},
                                 {"grows", r.grows},
                                 {"shrinks", r.shrinks},
                                 {"sharing_anomaly_jobs", r.anomalies},
                                 {"sharing_anomaly_tolerance_s", r.anomaly_tolerance_s},
                                 {"cancelled", r.cancelled},
                                 {"refused", r.refused},
                                 {"never_fit", r.unfinished},
                                 {"queues", per_queue},
                                 {"outcomes", OutcomesJson(cluster, r)}};
    }
    WriteOutput(*json_out, "--json", a.json, JsonText(j) + "\n");
  }
  if (!a.report.empty())
    WriteOutput(*report_out, "--report", a.report,
                ReplayReportHtml(
                    "berth replay: " + (a.trace.empty() ? a.format : BaseName(a.trace)), results));
}

}  // namespace

void AddSimCommand(CLI::App& app) {
  auto* sim = app.add_subcommand("sim", "Replay traces through the engine");
  sim->require_subcommand(1);
  auto* packing =
      sim->add_subcommand("packing", "The FGD paper's packing protocol on an openb trace");
  auto a = std::make_shared<PackingArgs>();
  packing->add_option("--nodes", a->nodes, "openb node list (CSV)")
      ->capture_default_str()
      ->check(NonEmptyPath());
  packing->add_option("--pods", a->pods, "openb pod list (CSV)")
      ->capture_default_str()
      ->check(NonEmptyPath());
  packing->add_option("--policy", a->policies,
                      "Policies, comma-separated: random, dotprod, gpu-clustering, gpu-packing, "
                      "bestfit, fgd, berth, or a policy file");
  packing->add_option("--seeds", a->seeds, "Seeds, e.g. 42-51 (the paper's) or 1,2,3");
  packing->add_option("--tune", a->tune, "Inflate the workload to this factor of capacity")
      ->check(DecimalNumber());
  packing->add_option("--candidates", a->candidates, "Nodes scored per pod (0: all, the protocol)")
      ->check(UpToLimit(0, &limits::Limits::nodes));
  packing->add_option("--json", a->json, "Write results as JSON")->check(NonEmptyPath());
  packing->add_option("--svg", a->svg, "Write the allocation-ratio curves as SVG")
      ->check(NonEmptyPath());
  packing->add_flag("--skip-malformed", a->skip_malformed, "Skip malformed trace rows, counted");
  packing->add_option("--variant", a->variant,
                      "Run a variant of the pod list instead, e.g. multigpu30-d2 "
                      "(`berth sim variants` lists them)");
  packing->add_flag("--bound", a->bound,
                    "Also the best packing of the same arrivals: an offline packing and an "
                    "upper bound, and the share of fgd's gap each policy closes");
  packing->callback([a] { RunSimPacking(*a); });

  auto* variants = sim->add_subcommand(
      "variants", "The held-out workload variants of an openb pod list, and their mix");
  auto v = std::make_shared<VariantsArgs>();
  variants->add_option("--nodes", v->nodes, "openb node list (CSV)")
      ->capture_default_str()
      ->check(NonEmptyPath());
  variants->add_option("--pods", v->pods, "openb pod list (CSV) they derive from")
      ->capture_default_str()
      ->check(NonEmptyPath());
  variants->callback([v] { RunSimVariants(*v); });

  auto* replay = sim->add_subcommand("replay", "Time-based replay: arrivals, queueing, JCT");
  auto r = std::make_shared<ReplayArgs>();
  replay
      ->add_option("--cluster", r->cluster, "Cluster file, openb node list or Tiresias cluster CSV")
      ->check(NonEmptyPath());
  replay
      ->add_option("--trace", r->trace, "Trace file (berth trace, openb pod list or Tiresias jobs)")
      ->check(NonEmptyPath());
  replay->add_option("--format", r->format, "berth, openb, tiresias or synthetic");
  replay->add_option("--vcs", r->vcs, "Virtual-cluster file: one queue per VC")
      ->check(NonEmptyPath());
  replay->add_option("--policy", r->policies, "Policies, comma-separated");
  replay->add_option("--jobs", r->jobs, "Synthetic: number of jobs, up to the jobs bound (--limit)")
      ->check(UpToLimit(1, &limits::Limits::jobs));
  replay->add_option("--load", r->load, "Synthetic: mean GPU demand / capacity")
      ->check(DecimalNumber());
  replay->add_option("--seed", r->seed, "Synthetic: seed, 0 to 2^64-1")->check(SeedText());
  CLI::Option* checkpoint =
      replay
          ->add_option("--checkpoint", r->checkpoint_s, "Checkpoint interval (s) of preempted jobs")
          ->check(DecimalNumber());
  replay->add_flag("--sjf", r->sjf, "Order by known duration (shortest first) instead of arrival");
  replay->add_option("--json", r->json, "Write results as JSON")->check(NonEmptyPath());
  replay->add_option("--report", r->report, "Write an HTML report with charts")
      ->check(NonEmptyPath());
  replay->add_flag("--skip-malformed", r->skip_malformed, "Skip malformed trace rows, counted");
  replay->callback([r, checkpoint] {
    r->checkpoint_given = checkpoint->count() > 0;
    RunSimReplay(*r);
  });
}

}  // namespace berth
