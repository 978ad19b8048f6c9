#include "server/control_plane.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "config/berth_trace.h"
#include "config/cells_report.h"
#include "config/config_error.h"
#include "config/mount_path.h"
#include "config/placement_json.h"
#include "config/policy_file.h"
#include "config/vc_file.h"
#include "core/fragmentation.h"
#include "core/image_name.h"
#include "core/job.h"
#include "core/node_comparison.h"

namespace berth {
namespace {

constexpr size_t kMaxOffGpusListed = 64;  // a node's containers off their GPUs, kept to say

// Placed and not stopping: what a restart adopts at its GPUs.
bool Placed(const std::string& state) {
  return state == "scheduled" || state == "starting" || state == "running";
}

// Assignment versions start at the wall clock in microseconds: a restarted server's versions
// are above any its predecessor handed out (agent_protocol.h).
uint64_t FirstVersion() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// The queues with "default" added when missing: a job that names no queue goes there.
std::vector<QueueSpec> WithDefaultQueue(std::vector<QueueSpec> queues) {
  const bool has_default = std::any_of(queues.begin(), queues.end(),
                                       [](const QueueSpec& q) { return q.name == "default"; });
  if (!has_default) queues.push_back({"default", 1, -1, {}});
  return queues;
}

// "a, b, c", or "none".
std::string Listed(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

}  // namespace

bool ControlPlane::Ended(const std::string& state) {
  return state == "succeeded" || state == "failed" || state == "stopped";
}

ControlPlane::ControlPlane(ControlPlaneConfig config, StateStore* store,
                           std::function<double()> now)
    : nodes_join_(config.nodes_join),
      allowed_mounts_(std::move(config.allowed_mounts)),
      store_(store),
      now_(std::move(now)),
      unhealthy_after_s_(config.unhealthy_after_s),
      lost_after_s_(config.lost_after_s),
      logs_(config.logs) {
  Rules rules{nullptr, std::move(config.queues), std::move(config.policy), {}};
  RulesText& text = rules.text;
  text.policy_from = config.policy_yaml.empty() ? "built in" : "the --policy file";
  text.policy_yaml = config.policy_yaml.empty()
                         ? "# The built-in policy \"" + rules.policy.name +
                               "\": a file of just its base.\nname: " + rules.policy.name +
                               "\nbase: " + rules.policy.name + "\n"
                         : std::move(config.policy_yaml);
  text.queues_from = config.queues_yaml.empty() ? "none given" : "the --vcs file";
  text.queues_yaml = config.queues_yaml.empty()
                         ? "# No queues file: only the queue \"default\" (no guarantee).\n"
                           "virtualClusters: {}\n"
                         : std::move(config.queues_yaml);
  // (config's texts are moved out by now)
  std::string policy_from = text.policy_from == "built in" ? " (built in)" : " from --policy",
              queues_from = text.queues_from == "none given" ? "no queues file (only \"default\")"
                                                             : "queues from --vcs";
  Cluster cluster = std::move(config.cluster);
  // (order of joining, kept row); an unreadable order sorts last
  std::vector<std::pair<std::optional<int64_t>, StoredSetting>> joined;
  for (const StoredSetting& setting : store_->LoadSettings()) {
    if (setting.key.rfind(kJoinedNodeKey, 0) == 0) {
      joined.emplace_back(JoinOrder(setting.value), setting);
      continue;
    }
    try {
      if (setting.key == "policy") {
        rules.policy = ParsePolicyYaml(setting.value, "the state's policy");
        text.policy_yaml = setting.value;
        text.policy_from = "applied through the API";
        policy_from = " applied through the API (kept in the state; --policy not used)";
      } else if (setting.key == "queues") {
        rules.queues = VcQueues(ParseVcYaml(setting.value, "the state's queues"));
        text.queues_yaml = setting.value;
        text.queues_from = "applied through the API";
        queues_from = "queues applied through the API (kept in the state; --vcs not used)";
      }
    } catch (const ConfigError& e) {
      throw ApiError(
          500, "the " + setting.key +
                   " applied through the API and kept in the state no longer loads: " + e.what());
    }
  }
  // Each node is checked against those that joined before it, as it was. One that no longer
  // loads is said, not fatal: the others and their jobs still come back.
  std::stable_sort(joined.begin(), joined.end(), [](const auto& a, const auto& b) {
    return a.first.has_value() && (!b.first.has_value() || *a.first < *b.first);
  });
  // Orders count joins, far below 2^31: one past that (not written by berth) would push every
  // later order out of what is read back, so the kept rows are numbered again, in this order.
  if (std::any_of(joined.begin(), joined.end(),
                  [](const auto& j) { return j.first && *j.first >= (int64_t{1} << 31); })) {
    std::vector<StoreWrite> renumbered;
    int64_t next = 0;
    for (auto& [order, setting] : joined) {
      nlohmann::json json = nlohmann::json::parse(setting.value, nullptr, false);
      if (!json.is_object()) continue;  // unreadable: a new place when its node registers
      order = next++;
      json["order"] = *order;
      setting.value = json.dump();
      renumbered.push_back(
          StoreWrite::Setting(setting, "node-changed", now_(),
                              "node " + setting.key.substr(kJoinedNodeKey.size()) +
                                  " takes place " + std::to_string(*order) +
                                  " in the join order: a kept order was past what berth writes"));
    }
    store_->Wait(store_->Enqueue(std::move(renumbered)));
  }
  std::string joined_left_out;
  std::map<std::string, NodeRegistration> rejoined;
  for (const auto& [order, setting] : joined) {
    const std::string name = setting.key.substr(kJoinedNodeKey.size());
    if (order) {  // else the node takes a new place when it registers
      join_order_[name] = *order;
      next_join_order_ = std::max(next_join_order_, *order + 1);
    }
    if (!nodes_join_) continue;
    NodeRegistration registration;
    if (std::string why = JoinAgain(name, setting.value, &cluster, &registration); !why.empty()) {
      joined_left_out += "; node " + name + " (joined before) is left out: " + why;
      left_out_[name].gpu_uuids = registration.gpu_uuids;  // none when it did not load
    } else
      rejoined[name] = std::move(registration);
  }
  rules.queues = WithDefaultQueue(std::move(rules.queues));
  const std::string policy_name = rules.policy.name;
  agents_.resize(cluster.nodes.size());
  on_node_.resize(cluster.nodes.size());
  const uint64_t first = FirstVersion();
  for (AgentNode& a : agents_) a.version = first;
  rules.cluster = std::make_shared<const Cluster>(std::move(cluster));
  rules_ = std::make_shared<const Rules>(std::move(rules));
  try {
    Recover();
  } catch (const ApiError& e) {
    // The queues may guarantee what only the nodes left out held: say which they are.
    if (joined_left_out.empty()) throw;
    throw ApiError(e.status, std::string(e.what()) + " (nodes that joined before are missing" +
                                 joined_left_out + ")");
  }
  recovery_summary_ += "; policy \"" + policy_name + "\"" + policy_from + "; " + queues_from;
  if (!nodes_join_) {
    // A cluster file's node where jobs ran (an agent reported them) is watched from now: its
    // agent is expected back, and one that never comes turns the node unhealthy, then lost
    // (its jobs placed again). Jobs only scheduled say nothing of an agent.
    const auto ran_on = [&](int64_t id) {
      const std::string& state = jobs_.at(id).stored.state;
      if (state != "starting" && state != "running") return;
      for (int n : NodesOf(jobs_.at(id).stored.placements)) {
        agents_[n].expected = agents_[n].may_run_jobs = true;
        agents_[n].last_seen = now_();
      }
    };
    for (int64_t id : stopping_) ran_on(id);
    for (const std::set<int64_t>& on : on_node_)
      for (int64_t id : on) ran_on(id);
    // --expect-agents: every other node's agent is expected too, as if it had just reported.
    // Not cordoned meanwhile: the engine would read the agents still on their way as capacity
    // gone, and reclaim for it.
    if (config.expect_agents)
      for (AgentNode& agent : agents_)
        if (!agent.expected) {
          agent.expected = true;
          agent.last_seen = now_();
        }
  }
  if (nodes_join_) {
    const size_t nodes = cluster_now().nodes.size();
    recovery_summary_ += "; " + std::to_string(nodes) + (nodes == 1 ? " node" : " nodes") +
                         " joined" + joined_left_out;
    // A node that joined before is watched from now: one whose agent never comes back turns
    // unhealthy, then lost. Until its agent is back it takes no new jobs (they would wait for
    // it, and for nothing if it is gone): the server's cordon, which the agent's first report
    // with its containers lifts (registering says nothing of its container engine). Its GPUs
    // stay its own: no other node may register their UUIDs meanwhile.
    for (size_t n = 0; n < agents_.size(); ++n) {
      agents_[n].expected = agents_[n].may_run_jobs = true;
      agents_[n].last_seen = now_();
      agents_[n].registration = std::move(rejoined[cluster_now().nodes[n].name]);
      if (!engine_->allocator().node_cordoned(static_cast<int>(n))) {
        engine_->SetNodeCordoned(static_cast<int>(n), true, agents_[n].last_seen);
        agents_[n].cordoned_by_us = true;
      }
    }
  }
}

void ControlPlane::Record(Job& job, const std::string& state, const std::string& reason,
                          std::vector<StoreWrite>* writes) {
  const double now = std::max(now_(), job.stored.updated);
  // The first phase of a cold start: from becoming pending (the last change) to placed.
  if (state == "scheduled" && job.stored.state == "pending") {
    job.queued_s = now - job.stored.updated;
    start_phases_.try_emplace("queued", StartPhaseBuckets()).first->second.Observe(job.queued_s);
  }
  job.stored.state = state;
  job.stored.reason = reason;
  job.waiting.clear();  // a new wait has its own reason
  // Transitions are ordered by their sequence; the clock only labels them.
  job.stored.updated = now;
  writes->push_back(StoreWrite::Put(job.stored));
  Touch(job);
  // A job to place, or GPUs freed: the next cycle need not wait out its interval.
  if (state == "pending" || Ended(state)) {
    cycle_wanted_ = true;
    cycle_wanted_cv_.notify_one();
  }
}

void ControlPlane::WaitForWork(double max_wait_s) {
  std::unique_lock<std::mutex> lock(mu_);
  cycle_wanted_cv_.wait_for(lock, std::chrono::duration<double>(max_wait_s),
                            [this] { return cycle_wanted_ || watches_stopped_; });
}

bool ControlPlane::Desired(const Job& job) {
  return Placed(job.stored.state) && !job.stored.placements.empty();
}

std::set<int> ControlPlane::NodesOf(const std::string& placements) const {
  std::set<int> nodes;
  if (placements.empty()) return nodes;
  const nlohmann::json json = nlohmann::json::parse(placements, nullptr, false);
  if (!json.is_object()) return nodes;
  for (const nlohmann::json& r : json.value("replicas", nlohmann::json::array()))
    if (r.is_object() && r.contains("node") && r["node"].is_string())
      if (const int n = cluster_now().FindNode(r["node"].get<std::string>()); n >= 0)
        nodes.insert(n);
  return nodes;
}

void ControlPlane::Touch(Job& job) {
  const int64_t id = job.stored.id;
  if ((job.stored.state == "preempted" ||
       ((job.stored.state == "stopped" || job.stored.state == "failed") && job.engine_id >= 0)) &&
      !job.stored.placements.empty())
    stopping_.insert(id);
  else
    stopping_.erase(id);
  const std::set<int> now_on = Desired(job) ? NodesOf(job.stored.placements) : std::set<int>();
  std::string token;
  if (!job.stored.placements.empty()) {
    const nlohmann::json placements = nlohmann::json::parse(job.stored.placements, nullptr, false);
    if (placements.is_object()) token = placements.value("placement", "");
  }
  if (now_on == job.nodes && token == job.placement) return;
  std::set<int> changed = job.nodes;
  changed.insert(now_on.begin(), now_on.end());
  // Adopted while stopping (a restart, a reload): its nodes are told again, and their agents'
  // reports of it count once they have acted on that (ReportOn).
  if (stopping_.count(id))
    for (int n : NodesOf(job.stored.placements))
      if (!job.node_version.count(n)) changed.insert(n);
  for (int n : changed) {
    job.node_version[n] = ++agents_[n].version;
    if (now_on.count(n))
      on_node_[n].insert(id);
    else
      on_node_[n].erase(id);
  }
  if (!token.empty() && token != job.placement) {  // a new placement
    job.replicas.clear();
    job.adopted = false;
  }
  if (!token.empty()) {
    job.log_placement = token;
    job.log_nodes = NodesOf(job.stored.placements);
  }
  job.nodes = now_on;
  job.placement = token;
  assignments_changed_.notify_all();
}

bool ControlPlane::HasAgent(const Job& job) const {
  for (int n : NodesOf(job.stored.placements))
    if (agents_[n].registered) return true;
  return false;
}

void ControlPlane::Commit(std::vector<std::unique_lock<std::mutex>*> locks,
                          std::vector<StoreWrite> writes, uint64_t enqueued) {
  // Tickets commit in order: waiting for the later one waits for both.
  const uint64_t ticket = writes.empty() ? enqueued : store_->Enqueue(std::move(writes));
  // Released innermost first; other callers' writes then join the same commit.
  for (auto it = locks.rbegin(); it != locks.rend(); ++it) (*it)->unlock();
  try {
    AwaitCommitted(ticket);
  } catch (const ApiError&) {
    broken_ = true;
    throw;
  }
}

void ControlPlane::AwaitCommitted(uint64_t ticket) const {
  if (ticket == 0) return;
  try {
    store_->Wait(ticket);
  } catch (const StoreError& e) {
    throw ApiError(503, std::string("the state could not be saved: ") + e.what() +
                            "; the server stops, restart it to rebuild from the database");
  }
}

void ControlPlane::RefuseIfBroken() const {
  if (broken_)
    throw ApiError(503, "the state store failed; restart the server to rebuild from the database");
}

std::string ControlPlane::WhyUnrunnable(const Rules& rules, const JobSpec& spec) const {
  // A cluster that nodes join may hold it later: it waits (the API does not say why yet).
  if (const std::string why = WhyJobNeverFits(*rules.cluster, spec); !why.empty() && !nodes_join_)
    return "no node of this cluster can ever hold it: " + why;
  const auto queue = std::find_if(rules.queues.begin(), rules.queues.end(),
                                  [&](const QueueSpec& q) { return q.name == spec.queue; });
  if (queue == rules.queues.end()) return "queue: unknown queue \"" + spec.queue + "\"";
  return WhyRefused(*rules.cluster, rules.policy, *queue, spec);
}

std::string ControlPlane::WhyMountsRefused(const JobSpec& spec) const {
  const std::vector<std::string>& allowed = allowed_mounts_;
  for (const TaskGroup& group : spec.groups)
    for (const Mount& m : group.mounts) {
      if (std::any_of(allowed.begin(), allowed.end(),
                      [&](const std::string& prefix) { return PathUnder(m.host, prefix); }))
        continue;
      const std::string volume =
          "volumes: " + Quoted(m.host + ":" + m.container + (m.read_only ? ":ro" : "")) + ": ";
      if (allowed.empty())
        return volume +
               "this server allows no host paths (its admin allows directories with "
               "--allow-mount DIR, on berth server or berth up); drop the volume";
      return volume + "the host path " + m.host +
             " is not under a directory this server allows (--allow-mount): " + Listed(allowed) +
             "; mount from under one of them, or ask the admin to allow it";
    }
  return "";
}

ControlPlane::Loaded ControlPlane::Load(const Rules& rules, std::vector<StoredJob> stored,
                                        const std::vector<int>& cordoned, const std::string& when) {
  Loaded out;
  out.engine = std::make_unique<Scheduler>(rules.cluster.get(), rules.queues, rules.policy);
  if (!out.engine->error().empty()) {
    out.error = out.engine->error();
    return out;
  }
  const double now = now_();
  // Guaranteed work is adopted before borrowed work (the allocator binds guarantee cells as it
  // adopts), and placed jobs before pending ones take GPUs.
  std::vector<Job> placed_guaranteed, placed_borrowed, waiting;
  const auto keep_ended = [&out](Job& ended) {
    ++out.ended;
    out.jobs.emplace(ended.stored.id, std::move(ended));
  };
  for (StoredJob& s : stored) {
    Job job;
    job.stored = std::move(s);
    // Stopped, failed or preempted while its containers still stopped: its GPUs stay held
    // until they are gone, as before, so that nothing starts on them meanwhile.
    const bool stopping = (job.stored.state == "stopped" || job.stored.state == "failed" ||
                           job.stored.state == "preempted") &&
                          !job.stored.placements.empty();
    if (Ended(job.stored.state) && !stopping) {
      keep_ended(job);
      continue;
    }
    try {
      job.spec = ParseJobSubmission(job.stored.spec, "job " + std::to_string(job.stored.id),
                                    *rules.cluster, rules.queues, /*strict_booleans=*/false);
      job.spec.name = job.stored.name;
      job.spec.queue = job.stored.queue;
      job.spec.user = job.stored.user;  // the token's user, which the body may not name
      // What a submission is refused for, another cluster or policy checks again.
      if (const std::string why = WhyUnrunnable(rules, job.spec); !why.empty())
        throw ConfigError(why);
      if (const std::string why = WhyMountsRefused(job.spec); !why.empty()) throw ConfigError(why);
    } catch (const ConfigError& e) {
      if (Ended(job.stored.state)) {  // stopped: nothing of it is asked any more
        job.stored.placements.clear();
        keep_ended(job);
        continue;
      }
      ++out.failed;
      // Not adopted: its GPUs are free, and a later restart must not take it for stopping.
      job.stored.placements.clear();
      Record(job, "failed",
             when +
                 " its spec no longer suits this server's cluster, queues, policy or allowed "
                 "mounts: " +
                 e.what(),
             &out.writes);
      out.jobs.emplace(job.stored.id, std::move(job));
      continue;
    }
    if (Placed(job.stored.state) || stopping) {
      job.borrowed =
          nlohmann::json::parse(job.stored.placements, nullptr, false).value("borrowed", false);
      (job.borrowed ? placed_borrowed : placed_guaranteed).push_back(std::move(job));
    } else {
      job.stored.placements.clear();  // a preempted job that was stopping: its agent stops it
      waiting.push_back(std::move(job));
    }
  }
  for (auto* list : {&placed_guaranteed, &placed_borrowed}) {
    for (Job& job : *list) {
      std::string why = "a node or GPU it held is gone";
      if (const auto placements = ParsePlacements(job.stored.placements)) {
        job.engine_id = out.engine->Adopt(job.spec, *placements, job.borrowed, job.stored.submitted,
                                          job.stored.updated, &why);
        if (job.engine_id >= 0) {
          if (job.stored.moved) out.engine->RememberMoved(job.engine_id);
          if (Placed(job.stored.state)) {
            ++out.adopted;
          } else {
            out.engine->Stopping(job.engine_id, now, job.stored.reason);
            ++out.stopping;
          }
          Touch(job);  // its agents are handed it again (or told again to stop it)
          job.adopted = true;
          out.by_engine_id[job.engine_id] = job.stored.id;
          out.jobs.emplace(job.stored.id, std::move(job));
          continue;
        }
      }
      job.stored.placements.clear();
      if (!Placed(job.stored.state)) {  // stopping, and what held its GPUs is gone
        if (Ended(job.stored.state))
          keep_ended(job);
        else
          waiting.push_back(std::move(job));
        continue;
      }
      ++out.lost;
      Record(job, "lost", when + " its GPUs could not be taken again: " + why, &out.writes);
      waiting.push_back(std::move(job));
    }
  }
  // The operators' marks after the adoptions (a cordon keeps new work off a node; what runs
  // there stays) and before the queued jobs, which then see the nodes as they were left.
  for (int n : cordoned) out.engine->SetNodeCordoned(n, true, now);
  for (Job& job : waiting) {
    std::string why;
    // Queued as of its submission, so that it keeps its age (aging, order among equals) across
    // restarts and reloads.
    const double submitted = job.stored.submitted > 0 ? std::min(job.stored.submitted, now) : now;
    job.engine_id = out.engine->Submit(job.spec, submitted, &why);
    if (job.engine_id < 0) {
      ++out.failed;
      Record(job, "failed", when + " the engine refuses it: " + why, &out.writes);
    } else {
      if (job.stored.moved) out.engine->RememberMoved(job.engine_id);
      out.by_engine_id[job.engine_id] = job.stored.id;
      if (job.stored.state != "pending") Record(job, "pending", "queued again", &out.writes);
    }
    out.jobs.emplace(job.stored.id, std::move(job));
  }
  return out;
}

void ControlPlane::Recover() {
  std::vector<int> cordoned;
  for (const StoredNode& marked : store_->LoadNodes()) {
    const int n = cluster_now().FindNode(marked.name);
    if (!marked.cordoned) continue;
    if (n >= 0)
      cordoned.push_back(n);
    else if (auto left = left_out_.find(marked.name); left != left_out_.end())
      left->second.cordoned = true;  // cordoned again when it joins
    // else a node gone from the cluster file, or one that never joined: nothing to do
  }
  next_id_ = store_->NextJobId();
  Loaded loaded = Load(*rules_, store_->LoadJobs(), cordoned, "after a restart");
  if (!loaded.error.empty()) throw ApiError(500, loaded.error);
  engine_ = std::move(loaded.engine);
  jobs_ = std::move(loaded.jobs);
  by_engine_id_ = std::move(loaded.by_engine_id);
  auto count = [](size_t n, const std::string& one, const std::string& many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  recovery_summary_ = count(jobs_.size(), "job", "jobs") +
                      " in the state: " + count(loaded.adopted, "placed job", "placed jobs") +
                      " adopted, " + std::to_string(loaded.lost) + " lost their GPUs, " +
                      std::to_string(loaded.failed) + " failed (no longer runnable here), " +
                      std::to_string(loaded.ended) + " ended; " +
                      count(cordoned.size(), "node", "nodes") + " cordoned";
  if (loaded.stopping > 0)
    recovery_summary_ += "; " + count(loaded.stopping, "stopping job", "stopping jobs") +
                         " still holding GPUs until their containers stop";
  for (const auto& [name, left] : left_out_)
    if (left.cordoned) recovery_summary_ += " (and node " + name + " when it joins again)";
  if (!loaded.writes.empty()) store_->Wait(store_->Enqueue(std::move(loaded.writes)));
}

std::shared_ptr<const ControlPlane::Rules> ControlPlane::CurrentRules() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rules_;
}

std::string ControlPlane::Reload(const std::function<void(Rules&)>& change, const std::string& what,
                                 const std::string& label, StoredSetting setting,
                                 const std::string& by) {
  RefuseIfBroken();
  std::unique_lock<std::mutex> engine_lock(engine_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  Rules rules = *rules_;
  change(rules);
  rules.queues = WithDefaultQueue(std::move(rules.queues));
  // A queue with jobs not ended stays: its jobs would have nowhere to wait.
  std::map<std::string, int> not_ended;
  std::vector<StoredJob> stored;
  for (const auto& [id, job] : jobs_) {
    stored.push_back(job.stored);
    if (!Ended(job.stored.state)) ++not_ended[job.stored.queue];
  }
  for (const auto& [queue, count] : not_ended)
    if (std::none_of(rules.queues.begin(), rules.queues.end(),
                     [&](const QueueSpec& q) { return q.name == queue; }))
      throw ApiError(409, "queue \"" + queue + "\" has " + std::to_string(count) +
                              " jobs not ended (pending or placed), so it cannot be removed; "
                              "keep it in the file, or stop its jobs first (berth ps --queue " +
                              queue + ")");
  std::vector<int> cordoned;
  for (size_t n = 0; n < cluster_now().nodes.size(); ++n)
    if (engine_->allocator().node_cordoned(static_cast<int>(n)))
      cordoned.push_back(static_cast<int>(n));
  Loaded loaded = Load(rules, std::move(stored), cordoned, "under the new " + what);
  if (!loaded.error.empty()) throw ApiError(400, loaded.error);  // it names the file's line
  if (!loaded.writes.empty()) {
    constexpr int kListed = 10;
    std::string jobs;
    int broken = 0;
    for (const StoreWrite& w : loaded.writes) {
      if (w.job.state == "pending") continue;  // a lost job queued again: its loss is listed
      if (broken++ < kListed)
        jobs += "; job " + std::to_string(w.job.id) + " (" + w.job.queue + "): would be " +
                w.job.state + ", " + w.job.reason;
    }
    if (broken > kListed) jobs += "; and " + std::to_string(broken - kListed) + " more";
    throw ApiError(409, "the new " + what + " would not keep " + std::to_string(broken) +
                            " jobs as they are, so nothing was changed" + jobs +
                            "; stop those jobs first, or keep what they need");
  }
  const int queued =
      static_cast<int>(loaded.jobs.size()) - loaded.ended - loaded.adopted - loaded.stopping;
  std::string reason = label + " applied" + (by.empty() ? "" : " by " + by) + ": " +
                       std::to_string(loaded.adopted) + " placed jobs kept at their GPUs, " +
                       std::to_string(queued) + " pending jobs queued again";
  if (loaded.stopping > 0)
    reason += ", " + std::to_string(loaded.stopping) +
              " stopping jobs still holding GPUs until their containers stop";
  rules_ = std::make_shared<const Rules>(std::move(rules));
  engine_ = std::move(loaded.engine);
  engine_->SetTelemetry(ObservedTelemetry());
  for (auto& [id, job] : loaded.jobs) {  // what agents reported stays known
    const Job& old = jobs_.at(id);
    job.nodes = old.nodes;
    job.placement = old.placement;
    job.adopted = old.adopted;
    job.node_version = old.node_version;
    job.replicas = old.replicas;
    job.start_failures = old.start_failures;
    job.log_placement = old.log_placement;
    job.log_nodes = old.log_nodes;
  }
  jobs_ = std::move(loaded.jobs);
  by_engine_id_ = std::move(loaded.by_engine_id);
  incoming_.clear();  // every pending job is in the new engine
  Commit({&engine_lock, &lock},
         {StoreWrite::Setting(std::move(setting), what + "-applied", now_(), reason)});
  return reason;
}

std::string ControlPlane::ApplyPolicy(const std::string& yaml, const std::string& by) {
  Policy policy;
  try {
    policy = ParsePolicyYaml(yaml, "policy");
  } catch (const ConfigError& e) {
    throw ApiError(400, e.what());
  }
  const std::string label = "policy \"" + policy.name + "\"";
  return Reload(
      [&](Rules& rules) {
        rules.policy = std::move(policy);
        rules.text.policy_yaml = yaml;
        rules.text.policy_from = "applied through the API";
      },
      "policy", label, {"policy", yaml}, by);
}

std::string ControlPlane::ApplyQueues(const std::string& yaml, const std::string& by) {
  std::vector<QueueSpec> queues;
  try {
    queues = VcQueues(ParseVcYaml(yaml, "queues"));
  } catch (const ConfigError& e) {
    throw ApiError(400, e.what());
  }
  std::vector<std::string> names;
  for (const QueueSpec& q : WithDefaultQueue(queues)) names.push_back(q.name);
  return Reload(
      [&](Rules& rules) {
        rules.queues = std::move(queues);
        rules.text.queues_yaml = yaml;
        rules.text.queues_from = "applied through the API";
      },
      "queues", "queues " + Listed(names), {"queues", yaml}, by);
}

RulesText ControlPlane::InForce() const {
  const std::shared_ptr<const Rules> rules = CurrentRules();
  RulesText text = rules->text;
  text.policy_name = rules->policy.name;
  return text;
}

// The text a spec holds: YAML aliases let a small body stand for a large spec, which the server
// keeps and sends to agents with every assignment.
static size_t SpecTextBytes(const JobSpec& spec) {
  size_t bytes =
      spec.name.size() + spec.queue.size() + spec.user.size() + spec.priority_class.size();
  for (const TaskGroup& g : spec.groups) {
    bytes += g.name.size() + g.image.size();
    for (const auto& [key, value] : g.node_selector) bytes += key.size() + value.size();
    for (const Mount& m : g.mounts) bytes += m.host.size() + m.container.size();
    for (const std::string& argument : g.command) bytes += argument.size();
    for (const auto& [key, value] : g.env) bytes += key.size() + value.size();
  }
  return bytes;
}

JobSpec ControlPlane::CheckedSpec(const std::string& body, const Caller& caller,
                                  const Rules& rules) const {
  JobSpec spec;
  try {
    spec = ParseJobSubmission(body, "job", *rules.cluster, rules.queues, /*strict_booleans=*/true);
  } catch (const ConfigError& e) {
    throw ApiError(400, e.what());
  }
  // The NVIDIA container runtime exposes the GPUs this names; the agent sets it to the job's
  // own (a spec accepted before this rule is kept at a restart: the rule is here).
  for (const TaskGroup& g : spec.groups)
    if (g.env.count("NVIDIA_VISIBLE_DEVICES"))
      throw ApiError(400,
                     "env.NVIDIA_VISIBLE_DEVICES: berth sets it to the GPUs the job is "
                     "given; ask for GPUs with gpus, gpuMilli or migProfile instead");
  constexpr size_t kMaxSpecTextBytes = 1 << 20;  // what one request may carry
  if (const size_t bytes = SpecTextBytes(spec); bytes > kMaxSpecTextBytes)
    throw ApiError(400, "job: with its YAML aliases expanded the spec holds " +
                            std::to_string(bytes) + " bytes of text, more than the " +
                            std::to_string(kMaxSpecTextBytes) +
                            " a request may carry; repeat less (an alias of a large env or "
                            "command is copied into every group that names it)");
  // A submitted job runs containers (a trace's jobs run nowhere, and jobs accepted before this
  // rule are kept at a restart: the rule is here, not in the parser).
  for (size_t g = 0; g < spec.groups.size(); ++g)
    if (spec.groups[g].image.empty())
      throw ApiError(
          400, std::string(spec.groups.size() > 1 ? "groups[" + std::to_string(g) + "]: " : "") +
                   "missing required field \"image\": the container image the job "
                   "runs, e.g. \"image: pytorch:2.3\"");
  if (spec.queue.empty()) spec.queue = "default";
  if (!caller.user.empty()) {
    if (!spec.user.empty() && spec.user != caller.user)
      throw ApiError(403, "user: the token is " + caller.user +
                              "'s, and a job cannot be submitted as \"" + spec.user +
                              "\"; drop the field");
    spec.user = caller.user;
  } else if (spec.user.empty()) {
    spec.user = caller.login;
  }
  if (!caller.MayUseQueue(spec.queue))
    throw ApiError(403, "queue: " + caller.user + " may not submit to queue \"" + spec.queue +
                            "\"; the tokens file allows: " + Listed(caller.queues));
  if (const std::string why = WhyMountsRefused(spec); !why.empty()) throw ApiError(403, why);
  if (const std::string why = WhyUnrunnable(rules, spec); !why.empty())
    throw ApiError(400, "job: " + why);
  return spec;
}

int64_t ControlPlane::Submit(const std::string& body, const Caller& caller) {
  std::shared_ptr<const Rules> rules = CurrentRules();
  JobSpec spec = CheckedSpec(body, caller, *rules);
  RefuseIfBroken();
  std::unique_lock<std::mutex> lock(mu_);
  // A reload came between: the spec is checked again against the rules the engine now has.
  while (rules_ != rules) {
    rules = rules_;
    lock.unlock();
    spec = CheckedSpec(body, caller, *rules);
    lock.lock();
  }
  const int64_t id = next_id_++;
  if (spec.name.empty()) spec.name = "job-" + std::to_string(id);
  Job& job = jobs_[id];
  job.spec = std::move(spec);
  job.stored.id = id;
  job.stored.name = job.spec.name;
  job.stored.queue = job.spec.queue;
  job.stored.user = job.spec.user;
  job.stored.spec = body;
  job.stored.submitted = now_();
  incoming_.push_back(id);
  std::vector<StoreWrite> writes;
  Record(job, "pending", "submitted", &writes);
  Commit({&lock}, std::move(writes));
  return id;
}

void ControlPlane::SubmitIncoming(double now, std::vector<StoreWrite>* writes) {
  for (int64_t id : incoming_) {
    const auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second.stored.state != "pending") continue;  // stopped first
    Job& job = it->second;
    std::string why;
    job.engine_id = engine_->Submit(job.spec, now, &why);
    if (job.engine_id < 0)
      Record(job, "failed", "the engine refuses it: " + why, writes);
    else
      by_engine_id_[job.engine_id] = id;
  }
  incoming_.clear();
}

void ControlPlane::List(
    const JobFilter& filter,
    const std::function<void(const StoredJob& job, const std::string& reason)>& visit) const {
  uint64_t seen;
  {
    std::lock_guard<std::mutex> lock(mu_);
    size_t listed = 0;
    // Whether any scheduled job may be held back by its engine (StartBlocker), looked up once:
    // a listing of 100,000 jobs reads no job's placements otherwise.
    const bool engine_away = std::any_of(
        agents_.begin(), agents_.end(), [](const AgentNode& a) { return !a.engine_error.empty(); });
    for (auto it = jobs_.upper_bound(filter.after); it != jobs_.end() && listed < filter.limit;
         ++it) {
      const StoredJob& j = it->second.stored;
      if ((filter.queue.empty() || j.queue == filter.queue) &&
          (filter.states.empty() || filter.states.count(j.state) > 0) &&
          (!filter.live || !Ended(j.state) || stopping_.count(j.id) > 0) &&
          (filter.user.empty() || j.user == filter.user)) {
        const bool waits = j.state == "pending" && !it->second.waiting.empty();
        const std::string blocker =
            engine_away && j.state == "scheduled" ? StartBlocker(it->second) : "";
        visit(j, waits ? it->second.waiting : blocker.empty() ? j.reason : blocker);
        ++listed;
      }
    }
    seen = store_->Enqueued();
  }
  AwaitCommitted(seen);
}

std::vector<StoredJob> ControlPlane::List(const JobFilter& filter) const {
  std::vector<StoredJob> out;
  List(filter, [&](const StoredJob& j, const std::string& reason) {
    out.push_back(j);
    out.back().reason = reason;
  });
  return out;
}

ControlPlane::Job& ControlPlane::Find(int64_t id) {
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) throw ApiError(404, "no job " + std::to_string(id));
  return it->second;
}

const ControlPlane::Job& ControlPlane::Find(int64_t id) const {
  return const_cast<ControlPlane*>(this)->Find(id);
}

StoredJob ControlPlane::Get(int64_t id) const {
  StoredJob job;
  uint64_t seen;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job = Find(id).stored;
    seen = store_->Enqueued();
  }
  AwaitCommitted(seen);
  return job;
}

bool ControlPlane::Stopping(int64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopping_.count(id) > 0;
}

StoredJob ControlPlane::Stop(int64_t id) {
  RefuseIfBroken();
  std::unique_lock<std::mutex> engine_lock(engine_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  Job& job = Find(id);
  if (Ended(job.stored.state))
    throw ApiError(409,
                   "job " + std::to_string(id) + " has already ended (" + job.stored.state + ")");
  std::vector<StoreWrite> writes;
  if (job.engine_id >= 0 && !job.stored.placements.empty() && !StoppedEverywhere(job)) {
    // Its GPUs stay held until its agents report its containers gone (ReportOn), so that no
    // other job starts on them while it still runs there.
    engine_->Stopping(job.engine_id, now_(), "stopped on request");
    Record(job, "stopped", "stopped on request; its GPUs are held until its containers stop",
           &writes);
  } else {
    if (job.engine_id >= 0) FinishStopped(job);
    job.stored.placements.clear();
    Record(job, "stopped", "stopped on request", &writes);
  }
  const StoredJob result = job.stored;
  Commit({&engine_lock, &lock}, std::move(writes));
  return result;
}

void ControlPlane::Remove(int64_t id) {
  RefuseIfBroken();
  std::unique_lock<std::mutex> lock(mu_);
  Job& job = Find(id);
  if (!Ended(job.stored.state))
    throw ApiError(409, "job " + std::to_string(id) + " is " + job.stored.state +
                            "; stop it first (berth stop " + std::to_string(id) + ")");
  if (stopping_.count(id))  // its engine record holds its GPUs until its containers are gone
    throw ApiError(409, "job " + std::to_string(id) + " is " + job.stored.state +
                            " but its containers are still stopping (they hold its GPUs); "
                            "remove it once they have stopped");
  std::vector<StoreWrite> writes = {StoreWrite::Delete(job.stored)};
  jobs_.erase(id);
  Commit({&lock}, std::move(writes));
  if (logs_ != nullptr) logs_->Remove(id);
}

EventPage ControlPlane::Events(int64_t id, int64_t seq, size_t limit) const {
  Get(id);  // 404 for an unknown job
  return store_->JobEvents(id, seq, limit);
}

EventPage ControlPlane::EventsAfter(int64_t seq, size_t limit, const Caller& caller,
                                    double wait_s) const {
  // What a reader saw elsewhere (a node's condition, a job's state) is in the log it reads
  // next: the events queued so far are committed first, as Get and List wait for theirs.
  AwaitCommitted(store_->Enqueued());
  return store_->EventsAfter(seq, limit, caller.admin ? "" : caller.user, wait_s);
}

void ControlPlane::NodeAction(const std::string& name, const std::string& action) {
  if (action != "cordon" && action != "uncordon" && action != "drain")
    throw ApiError(400, "unknown node action \"" + action.substr(0, 40) +
                            "\"; known: cordon, uncordon, drain");
  RefuseIfBroken();
  std::unique_lock<std::mutex> engine_lock(engine_mu_);
  const int n = cluster_now().FindNode(name);
  const double now = now_();
  const bool cordon = action != "uncordon";
  if (n < 0) {
    // A node left out at a restart keeps the operator's mark until it joins again: there is
    // nothing on it to evict, so a drain is a cordon.
    std::unique_lock<std::mutex> lock(mu_);
    const auto left = left_out_.find(name);
    if (left == left_out_.end()) throw ApiError(404, "no node " + name.substr(0, 80));
    left->second.cordoned = cordon;
    Commit({&engine_lock, &lock},
           {StoreWrite::Node({name, cordon}, cordon ? "cordoned" : "uncordoned", now,
                             std::string(cordon ? "cordoned" : "uncordoned") +
                                 " on request while it is left out (it was not back since the "
                                 "restart); applied when it joins again")});
    return;
  }
  const std::vector<Decision> decisions =
      action == "drain" ? engine_->Drain(n, now) : engine_->SetNodeCordoned(n, cordon, now);
  std::vector<StoreWrite> writes = {
      StoreWrite::Node({name, cordon},
                       action == "drain" ? "drained"
                       : cordon          ? "cordoned"
                                         : "uncordoned",
                       now,
                       action == "drain"    ? "drained on request: no new jobs, its jobs evicted"
                       : action == "cordon" ? "cordoned on request: no new jobs"
                                            : "uncordoned on request")};
  std::unique_lock<std::mutex> lock(mu_);
  // The node's cordon is the operator's now: an agent that reports again does not lift it.
  agents_[n].cordoned_by_us = false;
  Apply(decisions, &writes);
  Commit({&engine_lock, &lock}, std::move(writes));
}

std::string ControlPlane::RemoveNode(const std::string& name) {
  RefuseIfBroken();
  const std::string shown = name.substr(0, 80);
  std::unique_lock<std::mutex> engine_lock(engine_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  if (!nodes_join_)
    throw ApiError(409, "node " + shown +
                            " is the cluster file's; remove it from the cluster file and restart "
                            "the server");
  const double now = now_();
  const int n = cluster_now().FindNode(name);
  std::string reason = "node " + name + " removed on request";
  std::vector<StoreWrite> writes;
  if (n < 0) {
    const auto left = left_out_.find(name);
    if (left == left_out_.end()) throw ApiError(404, "no node " + shown);
    left_out_.erase(left);
    reason += " (it was left out since the restart)";
  } else {
    const AgentNode& agent = agents_[n];
    if (agent.registered && !agent.unhealthy && !agent.lost)
      throw ApiError(409, "node " + name +
                              ": its agent still reports, and would join it again; stop the "
                              "agent on the node first");
    bool placed = !on_node_[n].empty();
    for (const auto& [id, record] : engine_->jobs())
      for (const ReplicaPlacement& p : record.placements)
        placed = placed || (p.node == n && record.state != JobState::kDone);
    if (placed)
      throw ApiError(409, "node " + name +
                              ": jobs are placed on it or still stopping there; drain it first "
                              "(berth node drain " +
                              name + ")");
    auto shrunk = std::make_shared<Cluster>(cluster_now());
    shrunk->nodes.erase(shrunk->nodes.begin() + n);
    LeaveNode(shrunk.get());
    if (std::string why = engine_->SetCluster(shrunk.get(), now); !why.empty())
      throw ApiError(409, "node " + name + " cannot leave the cluster: " + why);
    const std::shared_ptr<const Cluster> old = rules_->cluster;
    auto rules = std::make_shared<Rules>(*rules_);
    rules->cluster = shrunk;
    rules_ = std::move(rules);
    // The nodes after it move up one index, wherever an index is kept.
    agents_.erase(agents_.begin() + n);
    on_node_.erase(on_node_.begin() + n);
    auto moved = [n](int node) { return node > n ? node - 1 : node; };
    for (auto& [id, job] : jobs_) {
      std::set<int> nodes, log_nodes;
      for (int node : job.nodes)
        if (node != n) nodes.insert(moved(node));
      for (int node : job.log_nodes)
        if (node != n) log_nodes.insert(moved(node));
      std::map<int, uint64_t> versions;
      for (const auto& [node, version] : job.node_version)
        if (node != n) versions[moved(node)] = version;
      job.nodes = std::move(nodes);
      job.log_nodes = std::move(log_nodes);
      job.node_version = std::move(versions);
    }
    ++nodes_removed_;
    assignments_changed_.notify_all();
    FailJobsOfDroppedModels(*old, "node " + name + " was removed", now, &writes);
  }
  join_order_.erase(name);
  writes.push_back(StoreWrite::Forget(name, kJoinedNodeKey + name, "node-removed", now, reason));
  Commit({&engine_lock, &lock}, std::move(writes));
  return reason;
}

nlohmann::json ControlPlane::Cells() const {
  std::lock_guard<std::mutex> lock(engine_mu_);
  return CellsReport(cluster_now(), engine_->allocator());
}

std::vector<QueueStatus> ControlPlane::Queues() const {
  std::lock_guard<std::mutex> lock(engine_mu_);
  return engine_->Queues();
}

std::set<std::pair<int, int>> ControlPlane::HeldGpus() const {
  std::set<std::pair<int, int>> held;
  for (const auto& [id, record] : engine_->jobs())
    if (record.state == JobState::kRunning || record.state == JobState::kStopping)
      for (const ReplicaPlacement& p : record.placements)
        for (int g : p.gpus) held.insert({p.node, g});
  return held;
}

std::vector<ControlPlane::NodeStatus> ControlPlane::Nodes() const {
  std::lock_guard<std::mutex> engine_lock(engine_mu_);
  std::lock_guard<std::mutex> lock(mu_);
  const double now = now_();
  const std::set<std::pair<int, int>> held = HeldGpus();
  std::vector<NodeStatus> nodes;
  const Allocator& alloc = engine_->allocator();
  for (size_t n = 0; n < cluster_now().nodes.size(); ++n) {
    const int node = static_cast<int>(n);
    NodeStatus status;
    status.node = cluster_now().nodes[n];
    status.agent = AgentStatusOf(node, now);
    for (size_t g = 0; g < cluster_now().nodes[n].gpus.size(); ++g) {
      const int gpu = static_cast<int>(g);
      status.free_gpus += alloc.gpu_free(node, gpu) ? 1 : 0;
      status.gpu_map += alloc.gpu_bad(node, gpu) ? 'x' : held.count({node, gpu}) ? '#' : '.';
    }
    status.cordoned = alloc.node_cordoned(node);
    nodes.push_back(std::move(status));
  }
  return nodes;
}

void ControlPlane::Cycle() {
  RefuseIfBroken();
  std::unique_lock<std::mutex> engine_lock(engine_mu_);
  std::vector<StoreWrite> writes;
  const double now = now_();
  uint64_t early = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cycle_wanted_ = false;
    SubmitIncoming(now, &writes);
    CheckAgents(now, &writes);
    // Enqueued before mu_ is let go, as every change readers may see (AwaitCommitted).
    if (!writes.empty()) early = store_->Enqueue(std::exchange(writes, {}));
  }
  // The cycle itself holds only the engine: submissions and reads go on meanwhile.
  const auto started = std::chrono::steady_clock::now();
  const std::vector<Decision> decisions = engine_->Schedule(now);
  cycle_seconds_.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  std::map<int, std::set<int>> reserved_nodes;  // engine job id: the nodes it will land on
  for (const auto& [job, reservation] : engine_->reservations().all())
    for (const auto& [node, gpu] : reservation.gpus) reserved_nodes[job].insert(node);
  std::unique_lock<std::mutex> lock(mu_);
  Apply(decisions, &writes);
  RefreshWaiting(now);
  AskPrefetch(reserved_nodes);
  Commit({&engine_lock, &lock}, std::move(writes), early);
}

void ControlPlane::AskPrefetch(const std::map<int, std::set<int>>& reserved_nodes) {
  std::vector<std::vector<std::string>> wanted(agents_.size());
  for (const auto& [engine_id, nodes] : reserved_nodes) {  // oldest job first
    const auto id = by_engine_id_.find(engine_id);
    if (id == by_engine_id_.end()) continue;
    for (int n : nodes) {
      std::vector<std::string>& images = wanted[n];
      for (const TaskGroup& g : jobs_.at(id->second).spec.groups)
        if (images.size() < kMaxPrefetchImages &&
            std::find(images.begin(), images.end(), g.image) == images.end())
          images.push_back(g.image);
    }
  }
  for (size_t n = 0; n < agents_.size(); ++n) {
    if (wanted[n] == agents_[n].prefetch) continue;
    agents_[n].prefetch = std::move(wanted[n]);
    ++agents_[n].version;
    assignments_changed_.notify_all();
  }
}

// The nodes a job's replicas are placed on, for one that takes no GPU (a CPU-only job).
std::string ControlPlane::NodesOf(const JobRecord& record) const {
  std::set<std::string> names;
  for (const ReplicaPlacement& p : record.placements)
    names.insert(cluster_now().nodes[p.node].name);
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out + " (no GPU)";
}

void ControlPlane::Apply(const std::vector<Decision>& decisions, std::vector<StoreWrite>* writes) {
  for (const Decision& d : decisions) {
    const auto id = by_engine_id_.find(d.job);
    if (id == by_engine_id_.end()) continue;  // not a job of this server (cannot happen)
    Job& job = jobs_.at(id->second);
    const JobRecord* record = engine_->job(d.job);
    if (record == nullptr) continue;   // (cannot happen: it keeps every job it decides about)
    job.stored.moved = record->moved;  // kept across restarts and reloads: moved once in its life
    ++decisions_[d.kind];
    std::string gpus;
    for (const std::string& g : d.gpu_ids) gpus += (gpus.empty() ? "" : ", ") + g;
    switch (d.kind) {
      case Decision::Kind::kStart:
        // The token names this placement's containers: microseconds are unique per job.
        job.stored.placements =
            PlacementsJson(*record, "p" + std::to_string(static_cast<int64_t>(now_() * 1e6)));
        Record(job, "scheduled", "placed on " + (gpus.empty() ? NodesOf(*record) : gpus), writes);
        break;
      case Decision::Kind::kGrow:
      case Decision::Kind::kShrink:
        job.stored.placements = PlacementsJson(*record, job.placement);
        Record(job, job.stored.state,
               std::string(d.kind == Decision::Kind::kGrow ? "grew" : "shrank") + " to " +
                   std::to_string(record->replicas) + " replicas",
               writes);
        break;
      case Decision::Kind::kPreempt:
      case Decision::Kind::kEvict:
      case Decision::Kind::kKill: {
        // The preemptor by the id users know (review: the engine's own id named another job).
        std::string reason = d.reason;
        if (const auto p = by_engine_id_.find(d.preemptor); p != by_engine_id_.end())
          reason += " (job " + std::to_string(p->second) + ")";
        if (HasAgent(job)) {
          // Its agents stop the containers (a kill comes with their stop's grace period) and
          // report them gone: then Report tells the engine it stopped.
          if (job.stored.state != "preempted") {
            Record(job, "preempted", reason, writes);
            ++preemptions_;
          }
          break;
        }
        // Nothing runs it: it has stopped now.
        job.stored.placements.clear();
        Record(job, "preempted", reason, writes);
        ++preemptions_;
        const std::vector<Decision> starts = engine_->Stopped(d.job, now_());
        Record(job, "pending", "waiting again after it was preempted", writes);
        Apply(starts, writes);
        break;
      }
    }
  }
}

std::string ControlPlane::PlacementsJson(const JobRecord& record, const std::string& token) const {
  nlohmann::json replicas = nlohmann::json::array();
  nlohmann::json ids = nlohmann::json::array();
  for (const ReplicaPlacement& r : record.placements) {
    replicas.push_back(ReplicaPlacementJson(cluster_now(), r));
    for (int g : r.gpus) ids.push_back(cluster_now().nodes[r.node].name + "/" + std::to_string(g));
  }
  return nlohmann::json{
      {"borrowed", record.borrowed}, {"gpuIds", ids}, {"placement", token}, {"replicas", replicas}}
      .dump();
}

std::optional<std::vector<ReplicaPlacement>> ControlPlane::ParsePlacements(
    const std::string& text) const {
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  if (!json.is_object() || !json.contains("replicas") || !json["replicas"].is_array())
    return std::nullopt;
  std::vector<ReplicaPlacement> out(json["replicas"].size());
  for (size_t i = 0; i < out.size(); ++i)
    if (!ReadReplicaPlacement(cluster_now(), json["replicas"][i], &out[i])) return std::nullopt;
  return out;
}

}  // namespace berth

namespace berth {
const std::vector<std::string>& ControlPlane::JobStates() {
  static const std::vector<std::string> states = {"pending", "scheduled", "starting",
                                                  "running", "preempted", "lost",
                                                  "stopped", "failed",    "succeeded"};
  return states;
}

std::vector<double> ControlPlane::CycleSecondsBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
}

ControlPlane::MetricsSnapshot ControlPlane::Metrics() const {
  MetricsSnapshot out;
  std::lock_guard<std::mutex> engine_lock(engine_mu_);
  std::vector<PodShape> shapes;
  for (const std::string& state : JobStates()) out.jobs[state] = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, job] : jobs_) {
      ++out.jobs[job.stored.state];
      if (Ended(job.stored.state)) continue;
      for (const TaskGroup& g : job.spec.groups)
        shapes.push_back(PodShapeOf(cluster_now(), g.demand));
    }
  }
  out.queues = engine_->Queues();

  const Allocator& alloc = engine_->allocator();
  const std::vector<Node>& nodes = cluster_now().nodes;
  const std::set<std::pair<int, int>> held = HeldGpus();
  for (size_t n = 0; n < nodes.size(); ++n) {
    std::map<std::string, GpuCount> by_model;
    for (size_t g = 0; g < nodes[n].gpus.size(); ++g) {
      GpuCount& count = by_model[nodes[n].gpus[g].model];
      const int node = static_cast<int>(n), gpu = static_cast<int>(g);
      if (held.count({node, gpu}))
        ++count.allocated;
      else if (alloc.gpu_bad(node, gpu))
        ++count.bad;
      else if (alloc.node_cordoned(node))
        ++count.cordoned;
      else
        ++count.free;
    }
    for (auto& [model, count] : by_model) {
      count.node = nodes[n].name;
      count.model = model;
      out.gpus.push_back(std::move(count));
    }
  }
  if (!shapes.empty()) {
    const FragmentationModel model(&cluster_now(), TypicalPods(shapes, PaperTypicalPodsOptions()));
    out.fragmentation_gpus = model.ClusterFragmentation(alloc) / 1000;
  }

  out.cycle_seconds = cycle_seconds_;
  for (Decision::Kind kind :
       {Decision::Kind::kStart, Decision::Kind::kPreempt, Decision::Kind::kEvict,
        Decision::Kind::kKill, Decision::Kind::kGrow, Decision::Kind::kShrink}) {
    const auto it = decisions_.find(kind);
    out.decisions[DecisionKindName(kind)] = it == decisions_.end() ? 0 : it->second;
  }
  out.preemptions = preemptions_;
  std::lock_guard<std::mutex> lock(mu_);
  const double now = now_();
  for (size_t n = 0; n < agents_.size(); ++n) {
    // A node whose agent is expected but not registered yet: its silence counts, as CheckAgents
    // counts it, and nothing else is known.
    if (!agents_[n].registered && !agents_[n].expected) continue;
    out.heartbeat_ages.emplace_back(cluster_now().nodes[n].name, now - agents_[n].last_seen);
    if (!agents_[n].registered) continue;
    out.topology_mismatches.emplace_back(cluster_now().nodes[n].name,
                                         agents_[n].topology_mismatch.size());
    out.off_gpus.emplace_back(cluster_now().nodes[n].name, agents_[n].off_gpus.size());
    out.engine_up.emplace_back(cluster_now().nodes[n].name, agents_[n].engine_error.empty());
    if (!agents_[n].gpus.empty())
      out.gpu_telemetry.emplace_back(cluster_now().nodes[n].name, agents_[n].gpus);
  }
  for (const auto& [id, job] : jobs_)
    if (job.stored.state == "running")
      for (const auto& [replica, c] : job.replicas)
        if (c.state == "running") out.containers.emplace_back(id, replica, c);
  out.start_phases = start_phases_;
  return out;
}

}  // namespace berth

// The agent protocol (agent_protocol.h).
namespace berth {
namespace {

std::string Seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f", s);
  return text;
}

bool Live(const ContainerReport& c) { return c.state == "starting" || c.state == "running"; }

// A job whose containers could not be started this many times in a row fails: an image that
// does not exist or a command that is not there will not start on a later try either.
constexpr int kMaxStartFailures = 3;

// A MIG slice runs in the instance at its place (profile and start slot): where the cluster
// file lays out a GPU's instances otherwise than the node has them (`migs`, as its agent found
// them), slices placed there cannot start. A sentence per such GPU; one whose MIG mode differs
// is CompareNodes' to say.
std::vector<std::string> MigMismatch(const Cluster& cluster, int n, const Node& found,
                                     const std::vector<RegisteredMig>& migs) {
  std::vector<std::string> out;
  const Node& node = cluster.nodes[n];
  for (size_t g = 0; g < node.gpus.size(); ++g) {
    const Gpu& gpu = node.gpus[g];
    if (!gpu.mig_enabled || g >= found.gpus.size() || !found.gpus[g].mig_enabled) continue;
    const std::vector<MigProfile>& profiles = cluster.FindModel(gpu.model)->mig_profiles;
    std::set<std::string> has, declared;
    for (const RegisteredMig& m : migs)
      if (m.gpu == static_cast<int>(g)) has.insert(m.profile + "@" + std::to_string(m.start));
    std::vector<MigInstance> placed;
    PlaceMigLayout(profiles, gpu.mig_layout, &placed);  // ValidateCluster placed it before
    for (const MigInstance& i : placed)
      declared.insert(profiles[i.profile].name + "@" + std::to_string(i.start));
    // Made on demand (no layout) is never what a real host has: its agent makes none.
    if (!gpu.mig_layout.empty() && declared == has) continue;
    const auto listed = [](const std::set<std::string>& items) {
      std::string text;
      for (const std::string& item : items) text += (text.empty() ? "" : ", ") + item;
      return items.empty() ? std::string("none") : "[" + text + "]";
    };
    out.push_back("GPU " + std::to_string(g) + " has the MIG instances " + listed(has) +
                  (gpu.mig_layout.empty()
                       ? ", and berth would make them as slices need them, which its agent "
                         "does not do: make them (nvidia-smi mig -cgi), or lay them out in a "
                         "cluster file (mig.layout)"
                       : ", the cluster file lays out " + listed(declared)));
  }
  return out;
}

}  // namespace

void ControlPlane::RefuseASecondAgent(const AgentNode& agent, const std::string& node,
                                      const NodeRegistration& registration, double now) const {
  // A registration without a name (an older agent) is another process too: it must not erase
  // the name of the one that reports (review).
  const std::string& current = agent.registration.instance;
  if (!agent.registered || current.empty() || registration.instance == current) return;
  // Its agent is in touch (it reports, or registered; a node down for want of its container
  // engine included): a restarted agent gets in once the old process has missed three reports
  // (1 s apart unless it said otherwise), long before the node would turn unhealthy.
  const double silent = now - std::max(agent.last_seen, agent.registered_at);
  if (silent >= ReplaceableAfterS(agent.registration)) return;
  throw ApiError(
      409,
      "node " + node + " has an agent that was in touch " + Seconds(silent) + " s ago (process " +
          current + "); is one agent started twice under " +
          "one --node name? Stop one: the node's jobs would run on both",
      // Who holds the node: a refused agent on another engine removes its own copies.
      {{"heldBy",
        {{"instance", current},
         {"engine", agent.registration.engine},
         {"replaceableAfterMs", std::llround(ReplaceableAfterS(agent.registration) * 1000)}}}});
}

double ControlPlane::ReplaceableAfterS(const NodeRegistration& registration) const {
  const double every_s =
      registration.report_every_ms > 0 ? registration.report_every_ms / 1000.0 : 1.0;
  return std::min(3 * every_s, unhealthy_after_s_);
}

void ControlPlane::RefuseASupersededAgent(const AgentNode& agent, const std::string& node,
                                          const std::string& instance) const {
  if (instance.empty() || agent.registration.instance.empty() ||
      instance == agent.registration.instance)
    return;
  throw ApiError(
      409,
      "node " + node + " has registered another agent (process " + agent.registration.instance +
          ") since this one; this one must stop, or its jobs run on both",
      {{"replacedBy",
        {{"instance", agent.registration.instance}, {"engine", agent.registration.engine}}}});
}

uint64_t ControlPlane::RegisterAgent(const std::string& node,
                                     const NodeRegistration& registration) {
  RefuseIfBroken();
  // An agent reporting less often than twice in the unhealthy window reads as silent between
  // its reports: its node would turn unhealthy, then lost, and its jobs would run twice
  // (review: --heartbeat 20 against --node-lost-after 12 registered fine).
  if (const double every_s = registration.report_every_ms / 1000.0;
      2 * every_s > unhealthy_after_s_ + 1e-9) {
    char most[32];
    std::snprintf(most, sizeof most, "%g", unhealthy_after_s_ / 2);
    throw ApiError(400, "reportEveryMs: node " + node + "'s agent reports every " +
                            Seconds(every_s) + " s, and this server takes a node whose agent " +
                            "is silent for " + Seconds(unhealthy_after_s_) +
                            " s as unhealthy (berth server --node-unhealthy-after); report at " +
                            "least twice in that time (berth agent --heartbeat " + most +
                            " or less)");
  }
  std::unique_lock<std::mutex> engine_lock(engine_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  const double now = now_();
  std::vector<StoreWrite> writes;
  // A GPU is one node's: two agents sending one UUID would hand one GPU to two jobs.
  const std::set<std::string> uuids(registration.gpu_uuids.begin(), registration.gpu_uuids.end());
  // `held`: GPU UUIDs that are `whose` (a node's, said so).
  auto refuse_held = [&](const std::vector<std::string>& held, const std::string& whose) {
    for (const std::string& uuid : held)
      if (uuids.count(uuid))
        throw ApiError(409, "node " + node + ": GPU UUID " + uuid + " is " + whose +
                                "; each GPU belongs to one node (is one agent started twice, "
                                "under two --node names?)");
  };
  for (size_t other = 0; other < agents_.size(); ++other) {
    const std::string& name = cluster_now().nodes[other].name;
    const AgentNode& a = agents_[other];
    if (name == node || (!a.registered && !a.expected)) continue;
    refuse_held(a.registration.gpu_uuids,
                a.registered ? "registered by node " + name
                             : "node " + name +
                                   "'s (it joined before the server restarted; its agent has "
                                   "not registered again yet)");
  }
  // A node left out gives way to one in the cluster: it comes back once the GPUs are its own.
  if (cluster_now().FindNode(node) < 0)
    for (const auto& [name, left] : left_out_)
      if (name != node)
        refuse_held(left.gpu_uuids, "node " + name +
                                        "'s (it joined before the server restarted and is left "
                                        "out until its agent registers again)");
  int n = cluster_now().FindNode(node);
  if (n >= 0) RefuseASecondAgent(agents_[n], node, registration, now);
  // A node joins, or its shape follows what its agent found (a GPU lost, MIG laid out anew).
  if (nodes_join_ && (n < 0 || registration.found || registration.declared))
    n = Join(node, registration, now, &writes);
  if (n < 0)
    throw ApiError(404,
                   "no node " + node.substr(0, 80) +
                       " in the server's cluster; add it to the cluster file, or start the "
                       "agent with the --node name the cluster file gives this host",
                   {{"unknownNode", node}});
  const size_t declared = cluster_now().nodes[n].gpus.size();
  if (registration.gpu_uuids.size() != declared)
    throw ApiError(409,
                   "node " + node + ": its agent has " +
                       std::to_string(registration.gpu_uuids.size()) +
                       " GPUs and the cluster file declares " + std::to_string(declared) +
                       "; fix the cluster file, or the agent's --declare file",
                   KeptRuns(n));
  AgentNode& agent = agents_[n];
  const bool again = agent.registered;
  agent.registered = true;
  // A replaced process's watch ends now, with its refusal (Assignments).
  if (registration.instance != agent.registration.instance) assignments_changed_.notify_all();
  agent.registration = registration;
  // A node down (unhealthy or lost) comes back with its agent's first report, which says whether
  // it reaches its container engine: registering says nothing of it, so the outage goes on.
  // Registering again does not keep a node healthy: only reports do (review: an agent that
  // only registered kept its node ready). The first registration starts the clock.
  if (!again && !agent.unhealthy && !agent.lost) agent.last_seen = now;
  agent.registered_at = now;
  // Back after a restart: the server's cordon stays until its first report, which says whether
  // it reaches its container engine.
  writes.push_back(StoreWrite::Node(
      {node, engine_->allocator().node_cordoned(n) && !agent.cordoned_by_us}, "agent-registered",
      now,
      std::string(again ? "its agent registered again" : "its agent registered") + " with " +
          std::to_string(declared) + (registration.simulated ? " simulated" : "") + " GPUs"));
  // The node as found against the node as declared: said once each time it changes. An agent
  // that sends none (declared GPUs) leaves the condition as it was: nothing was compared.
  std::vector<std::string> mismatch = agent.topology_mismatch;
  if (registration.found) {
    mismatch = CompareNodes(*registration.found, cluster_now().nodes[n]);
    for (std::string& m : MigMismatch(cluster_now(), n, *registration.found, registration.migs))
      mismatch.push_back(std::move(m));
  }
  if (mismatch != agent.topology_mismatch) {
    std::string reason;
    for (const std::string& m : mismatch) reason += (reason.empty() ? "" : "; ") + m;
    writes.push_back(StoreWrite::Node(
        {node, engine_->allocator().node_cordoned(n) && !agent.cordoned_by_us},
        mismatch.empty() ? "topology-matches" : "topology-mismatch", now,
        mismatch.empty() ? "its agent found the topology the cluster file declares"
                         : "its agent found another topology than the cluster file declares, so "
                           "jobs may be pinned to CPUs away from their GPUs, or MIG slices fail "
                           "to start: " +
                               reason + "; fix the node in the cluster file"));
    agent.topology_mismatch = std::move(mismatch);
  }
  const uint64_t version = agent.version;
  Commit({&engine_lock, &lock}, std::move(writes));
  return version;
}

int ControlPlane::Join(const std::string& node, const NodeRegistration& registration, double now,
                       std::vector<StoreWrite>* writes) {
  const int before = cluster_now().FindNode(node);
  auto grown = std::make_shared<Cluster>(cluster_now());
  std::string why = JoinNode(node, registration, grown.get());
  if (why.empty() && before >= 0 && grown->nodes[before] == cluster_now().nodes[before]) {
    // As it joined; the row is kept again where a restart would not find this: a place in the
    // join order (its kept one did not load), or the GPU UUIDs now found.
    if (!join_order_.count(node))
      KeepJoined(
          node, registration, "node-changed",
          "node " + node + " takes a new place in the join order (its kept one did not load)", now,
          writes);
    else if (registration.gpu_uuids != agents_[before].registration.gpu_uuids)
      KeepJoined(
          node, registration, "node-changed",
          "node " + node + " registered again with other GPU UUIDs, kept for the next restart", now,
          writes);
    return before;
  }
  // Other labels only: relabeled in place whatever runs there (a placed job keeps its node;
  // selectors are checked when a job is placed).
  bool relabeled = false;
  if (why.empty() && before >= 0) {
    Node with_old_labels = grown->nodes[before];
    with_old_labels.labels = cluster_now().nodes[before].labels;
    relabeled = with_old_labels == cluster_now().nodes[before];
  }
  if (why.empty() && before >= 0 && !relabeled)
    for (const auto& [id, record] : engine_->jobs())
      for (const ReplicaPlacement& p : record.placements)
        if (p.node == before && record.state != JobState::kDone)
          throw ApiError(409,
                         "node " + node +
                             ": its agent found other hardware than the node joined with, "
                             "and jobs are placed on it or still stopping there; drain it "
                             "(berth node drain " +
                             node +
                             "), restart its agent once they have stopped, then uncordon "
                             "it (berth node uncordon " +
                             node + ")",
                         KeptRuns(before));
  if (why.empty()) why = engine_->SetCluster(grown.get(), now);
  if (!why.empty())
    throw ApiError(400, "node " + node.substr(0, 80) + " cannot join the cluster: " + why);
  const std::shared_ptr<const Cluster> old = rules_->cluster;
  auto rules = std::make_shared<Rules>(*rules_);
  rules->cluster = grown;
  rules_ = std::move(rules);
  FailJobsOfDroppedModels(*old, "node " + node + " has other GPUs now", now, writes);
  const int n = grown->FindNode(node);
  bool cordon_kept = false;  // left out at a restart: the operator's mark holds again
  if (before < 0) {
    agents_.emplace_back().version = FirstVersion();
    on_node_.emplace_back();
    if (auto left = left_out_.find(node); left != left_out_.end()) {
      cordon_kept = left->second.cordoned;
      left_out_.erase(left);
    }
  }
  const Node& added = grown->nodes[n];
  std::string gpus = std::to_string(added.gpus.size()) + " GPUs";
  if (!added.gpus.empty()) gpus += " (" + added.gpus[0].model + ")";
  std::string labels;
  for (const auto& [key, value] : added.labels)
    labels += (labels.empty() ? "" : ", ") + key + "=" + value;
  const std::string shape = gpus + ", " + std::to_string(added.sockets.size()) + " sockets, " +
                            std::to_string(added.cpu_milli / 1000) + " CPUs";
  KeepJoined(
      node, registration, before < 0 ? "node-joined" : "node-changed",
      "node " + node +
          (before < 0 ? " joined the cluster as its agent registered, with " + shape
           : relabeled
               ? " has other labels, as its agent registered: " +
                     (labels.empty() ? std::string("none") : labels)
               : " has other hardware than it joined with, as its agent found: now " + shape),
      now, writes);
  if (cordon_kept) {
    Apply(engine_->SetNodeCordoned(n, true, now), writes);
    writes->push_back(StoreWrite::Node(
        {node, true}, "cordoned", now,
        "cordoned as it joined: the operator's cordon, kept while it was left out"));
  }
  return n;
}

void ControlPlane::KeepJoined(const std::string& node, const NodeRegistration& registration,
                              const std::string& kind, const std::string& reason, double now,
                              std::vector<StoreWrite>* writes) {
  // One row per node, with the order of joining, which a restart follows; a node that joins
  // again keeps its place.
  auto order = join_order_.find(node);
  if (order == join_order_.end()) order = join_order_.emplace(node, next_join_order_++).first;
  writes->push_back(StoreWrite::Setting(
      {kJoinedNodeKey + node,
       nlohmann::json{{"order", order->second}, {"registration", ToJson(registration)}}.dump()},
      kind, now, reason));
}

void ControlPlane::FailJobsOfDroppedModels(const Cluster& old, const std::string& cause, double now,
                                           std::vector<StoreWrite>* writes) {
  std::set<std::string> dropped;
  for (const GpuModel& m : old.models)
    if (!cluster_now().FindModel(m.name)) dropped.insert(m.name);
  if (dropped.empty()) return;
  // A waiting job naming such a model: a restart could not check its spec again (the model's
  // size left with it) and would fail it, so it fails now, the same way.
  for (auto& [id, job] : jobs_) {
    if (job.stored.state != "pending" || job.engine_id < 0) continue;
    std::string gone;
    for (const TaskGroup& g : job.spec.groups)
      for (const std::string& model : g.demand.models)
        if (dropped.count(model)) gone = model;
    if (gone.empty()) continue;
    engine_->Finish(job.engine_id, now, JobEnd::kFailed);
    by_engine_id_.erase(job.engine_id);
    job.engine_id = -1;
    Record(job, "failed",
           "GPU model " + gone + " left the cluster (" + cause +
               "); submit it again naming the models there are",
           writes);
  }
}

std::optional<int64_t> ControlPlane::JoinOrder(const std::string& kept) {
  const nlohmann::json json = nlohmann::json::parse(kept, nullptr, false);
  if (!json.is_object() || !json.contains("order") || !json["order"].is_number_integer())
    return std::nullopt;
  const int64_t order = json["order"].get<int64_t>();
  // Orders count joins: one past 2^53 was not written by berth.
  if (order < 0 || order >= (int64_t{1} << 53)) return std::nullopt;
  return order;
}

std::string ControlPlane::JoinAgain(const std::string& node, const std::string& kept,
                                    Cluster* cluster, NodeRegistration* registration) {
  try {
    const nlohmann::json json = nlohmann::json::parse(kept);
    if (!json.is_object() || !json.contains("registration"))
      return "its kept registration has no \"registration\"";
    *registration = ParseRegistration(json["registration"]);
    return JoinNode(node, *registration, cluster);
  } catch (const std::exception& e) {
    return std::string("its kept registration does not load: ") + e.what();
  }
}

void ControlPlane::RefuseUnknownNode(const std::string& node) const {
  // Where nodes join, its agent registers again (on 409) and the node joins, or is told why
  // not: a node left out at a restart comes back without restarting its agent.
  if (nodes_join_)
    throw ApiError(409, "no node " + node.substr(0, 80) +
                            " in the cluster (yet); register first, and the node joins");
  throw ApiError(404, "no node " + node.substr(0, 80), {{"unknownNode", node}});
}

std::shared_ptr<const Cluster> ControlPlane::cluster() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rules_->cluster;
}

size_t ControlPlane::max_nodes() const {
  return nodes_join_ ? kMaxJoinedNodes : cluster()->nodes.size();
}

void ControlPlane::StopWatches() {
  std::lock_guard<std::mutex> lock(mu_);
  watches_stopped_ = true;
  assignments_changed_.notify_all();
}

AssignmentSet ControlPlane::Assignments(const std::string& node, uint64_t since, double wait_s,
                                        const std::string& instance) const {
  std::unique_lock<std::mutex> lock(mu_);
  int n = cluster_now().FindNode(node);
  if (n < 0) RefuseUnknownNode(node);
  // Until then the server does not know the node's GPU UUIDs (a restart forgets them).
  if (!agents_[n].registered)
    throw ApiError(409, "node " + node +
                            ": its agent has not registered with this server since it started; "
                            "register first (POST /v1/agents/" +
                            node + "/register)");
  RefuseASupersededAgent(agents_[n], node, instance);
  const uint64_t removed = nodes_removed_;
  const std::string current = agents_[n].registration.instance;
  assignments_changed_.wait_for(lock, std::chrono::duration<double>(wait_s), [&] {
    return nodes_removed_ != removed || agents_[n].version != since || broken_ ||
           watches_stopped_ || agents_[n].registration.instance != current;
  });
  if (nodes_removed_ != removed) {  // this node may be gone, or at another index
    n = cluster_now().FindNode(node);
    if (n < 0) RefuseUnknownNode(node);
  }
  RefuseASupersededAgent(agents_[n], node, instance);
  AssignmentSet set;
  set.version = agents_[n].version;
  for (int64_t id : on_node_[n]) AssignmentsOf(jobs_.at(id), n, &set.assignments);
  set.prefetch = agents_[n].prefetch;
  // A placement a restart could forget is never started: the agent sees it once it is kept.
  const uint64_t seen = store_->Enqueued();
  lock.unlock();
  AwaitCommitted(seen);
  return set;
}

nlohmann::json ControlPlane::KeptRuns(int node) const {
  std::vector<Assignment> runs;
  for (int64_t id : on_node_[node]) AssignmentsOf(jobs_.at(id), node, &runs);
  nlohmann::json keep = nlohmann::json::array();
  for (const Assignment& a : runs)
    keep.push_back({{"job", a.job}, {"replica", a.replica}, {"placement", a.placement}});
  return {{"keep", keep}};
}

void ControlPlane::AssignmentsOf(const Job& job, int node, std::vector<Assignment>* out) const {
  const auto placements = ParsePlacements(job.stored.placements);
  if (!placements) return;
  const Node& host = cluster_now().nodes[node];
  const std::vector<std::string>& uuids = agents_[node].registration.gpu_uuids;
  // Replica i belongs to the group whose replicas, in group order, cover i.
  std::vector<const TaskGroup*> groups;
  for (const TaskGroup& g : job.spec.groups)
    for (int r = 0; r < g.replicas; ++r) groups.push_back(&g);
  for (size_t i = 0; i < placements->size() && i < groups.size(); ++i) {
    const ReplicaPlacement& p = (*placements)[i];
    if (p.node != node) continue;
    const TaskGroup& g = *groups[i];
    Assignment a;
    a.job = job.stored.id;
    a.replica = static_cast<int>(i);
    a.placement = job.placement;
    a.name = job.stored.name;
    a.image = g.image;
    a.command = g.command;
    for (const auto& [key, value] : g.env) a.env.push_back(key + "=" + value);
    for (const Mount& m : g.mounts) a.mounts.push_back({m.host, m.container, m.read_only});
    a.shm_bytes = g.shm_bytes;
    a.memory_bytes = g.demand.memory_mib << 20;
    a.nano_cpus = g.demand.cpu_milli * 1000000;
    a.gpus = p.gpus;
    for (int gpu : p.gpus)
      a.gpu_uuids.push_back(gpu < static_cast<int>(uuids.size()) ? uuids[gpu] : "");
    if (p.mig_profile >= 0 && !p.gpus.empty()) {
      const GpuModel* model = cluster_now().FindModel(host.gpus[p.gpus[0]].model);
      a.mig_profile = model->mig_profiles[p.mig_profile].name;
      a.mig_start = p.mig_start;
      for (const RegisteredMig& m : agents_[node].registration.migs)
        if (m.gpu == p.gpus[0] && m.profile == a.mig_profile && m.start == p.mig_start)
          a.gpu_uuids = {m.uuid};
    }
    // Pinned to the CPUs and memory of its GPUs' sockets (one NUMA node each); a replica
    // without GPUs may use every socket.
    std::set<int> sockets;
    for (int gpu : p.gpus) sockets.insert(host.switches[host.gpus[gpu].pcie_switch].socket);
    if (sockets.empty())
      for (size_t s = 0; s < host.sockets.size(); ++s) sockets.insert(static_cast<int>(s));
    for (int s : sockets) {
      for (int cpu : host.sockets[s].cpus)
        a.cpuset_cpus += (a.cpuset_cpus.empty() ? "" : ",") + std::to_string(cpu);
      a.cpuset_mems += (a.cpuset_mems.empty() ? "" : ",") + std::to_string(s);
    }
    a.grace_s = static_cast<int>(std::ceil(job.spec.grace_period_s));
    if (logs_ != nullptr) a.log_since = logs_->Cursor(a.job, a.replica, a.placement);
    const auto reported = job.replicas.find(a.replica);
    // Reported by its agent, or (across a restart of the server, which keeps no reports) its
    // output stored: it ran. A job's state cannot tell: it runs once any replica does.
    a.ran = (reported != job.replicas.end() && reported->second.placement == a.placement) ||
            !a.log_since.empty();
    out->push_back(std::move(a));
  }
}

ReportReply ControlPlane::Report(const std::string& node, AgentReport report) {
  RefuseIfBroken();
  ReportReply reply;
  // The node's index is looked up under each hold of mu_: a removal moves the nodes after it.
  if (logs_ != nullptr) {
    std::vector<const LogChunk*> chunks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const int n = cluster_now().FindNode(node);
      if (n < 0) RefuseUnknownNode(node);
      RefuseASupersededAgent(agents_[n], node, report.instance);
      for (const LogChunk& chunk : report.logs) {
        const auto job = jobs_.find(chunk.job);
        // Only the output of the job's latest placement, from a node of it.
        if (job != jobs_.end() && job->second.log_placement == chunk.placement &&
            job->second.log_nodes.count(n))
          chunks.push_back(&chunk);
      }
    }
    // Written before the states below: a job seen to end has its whole output stored.
    for (const LogChunk* c : chunks) {
      // A chunk without `from` (an older agent) goes on from the server's copy.
      const std::string from =
          c->from ? NormalizedTimestamp(*c->from) : logs_->Cursor(c->job, c->replica, c->placement);
      const bool taken = logs_->Append(c->job, c->replica, c->placement, from,
                                       NormalizedTimestamp(c->until), c->text, c->stderr_spans);
      const LogCursor at{c->job, c->replica, c->placement,
                         logs_->Cursor(c->job, c->replica, c->placement)};
      if (logs_->Full(c->job))
        reply.logs_full.push_back(at);
      else if (!taken)
        reply.log_cursors.push_back(at);
    }
    std::set<std::tuple<int64_t, int, std::string>> behind;
    for (const LogCursor& c : reply.log_cursors) behind.emplace(c.job, c.replica, c.placement);
    for (ContainerReport& c : report.containers)
      if ((c.state == "exited" || c.state == "interrupted") &&
          behind.count({c.job, c.replica, c.placement}))
        c.state = "running";
  }
  std::unique_lock<std::mutex> engine_lock(engine_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  const int n = cluster_now().FindNode(node);
  if (n < 0) RefuseUnknownNode(node);
  AgentNode& agent = agents_[n];
  if (!agent.registered)
    throw ApiError(409, "node " + node + " has not registered with this server; register first");
  RefuseASupersededAgent(agent, node, report.instance);
  const double now = now_();
  std::vector<StoreWrite> writes;
  const double silent_since = agent.last_seen;
  agent.last_seen = now;
  if (!report.gpus.empty() || report.images) {
    if (!report.gpus.empty()) agent.gpus = report.gpus;
    if (report.images) {
      agent.images = *report.images;
      std::map<std::string, int64_t> layers;
      for (const ReportedImage& image : agent.images)
        for (const ImageLayer& l : image.layers) layers[l.digest] = l.bytes;
      agent.image_bytes = 0;
      for (const auto& [digest, bytes] : layers) agent.image_bytes += bytes;
    }
    // In place: GPUs come every heartbeat, and a copy of every node's layers would cost more.
    engine_->UpdateTelemetry([&](Telemetry& t) {
      ObserveNode(n, report.images.has_value(), &t);
      if (report.images) t.image_layers = KnownImageLayers();
    });
  }
  if (!report.runtime_error.empty()) {
    // The agent lives but cannot run or see containers: the node turns unhealthy, then lost,
    // on the clock of silence, from the first such report.
    // A node down for silence stays down: the outage goes on, counted from its start.
    if (agent.engine_away_since < 0)
      agent.engine_away_since = agent.unhealthy || agent.lost ? silent_since : now;
    agent.engine_error = report.runtime_error;
    CheckAgents(now, &writes);
    Commit({&engine_lock, &lock}, std::move(writes));
    return reply;
  }
  agent.engine_away_since = -1;
  agent.engine_error.clear();
  if (agent.unhealthy || agent.lost) CheckAgents(now, &writes);
  // Back after a restart before its node turned unhealthy (a node still down keeps the cordon).
  if (agent.cordoned_by_us && !agent.unhealthy && !agent.lost) {
    Apply(engine_->SetNodeCordoned(n, false, now), &writes);
    agent.cordoned_by_us = false;
    writes.push_back(StoreWrite::Node(
        {node, engine_->allocator().node_cordoned(n)}, "healthy", now,
        "its agent reports again after the server's restart, with its containers: it takes new "
        "jobs again"));
  }
  std::map<std::pair<int64_t, int>, const ContainerReport*> mine;
  std::vector<std::string> off_gpus;  // the node's containers left away from their GPUs
  for (const ContainerReport& c : report.containers) {
    const auto job = jobs_.find(c.job);
    if (job != jobs_.end() && job->second.placement == c.placement && !c.placement.empty())
      mine[{c.job, c.replica}] = &c;
    // Only runs placed here now: an agent names no other job's containers.
    if (!c.off_gpus.empty() && off_gpus.size() < kMaxOffGpusListed && job != jobs_.end() &&
        job->second.placement == c.placement && on_node_[n].count(c.job))
      off_gpus.push_back("job " + std::to_string(c.job) + " replica " + std::to_string(c.replica) +
                         " " + c.off_gpus);
  }
  // Said once each time the list changes, as the topology condition is; the event names the
  // first few (the node's list has them all).
  if (off_gpus != agent.off_gpus) {
    std::string reason;
    for (const std::string& o : off_gpus)
      if (reason.size() < 2048) reason += (reason.empty() ? "" : "; ") + o;
    writes.push_back(StoreWrite::Node(
        {node, engine_->allocator().node_cordoned(n) && !agent.cordoned_by_us},
        off_gpus.empty() ? "affinity-matches" : "affinity-mismatch", now,
        off_gpus.empty() ? "every container runs on the CPUs of its GPUs' NUMA node"
                         : "containers run on CPUs away from their GPUs' NUMA node: " + reason));
    agent.off_gpus = std::move(off_gpus);
  }
  std::set<int64_t> ids = on_node_[n];
  ids.insert(stopping_.begin(), stopping_.end());
  for (int64_t id : ids) {
    const auto job = jobs_.find(id);
    if (job != jobs_.end()) ReportOn(job->second, n, report, mine, now, &writes);
  }
  Commit({&engine_lock, &lock}, std::move(writes));
  return reply;
}

Telemetry ControlPlane::ObservedTelemetry() const {
  Telemetry telemetry;
  for (size_t i = 0; i < agents_.size(); ++i) ObserveNode(static_cast<int>(i), true, &telemetry);
  telemetry.image_layers = KnownImageLayers();
  return telemetry;
}

void ControlPlane::ObserveNode(int n, bool images, Telemetry* t) const {
  const size_t nodes = agents_.size();
  t->gpus.resize(nodes);
  t->node_images.resize(nodes);
  t->node_layers.resize(nodes);
  std::vector<GpuTelemetry>& gpus = t->gpus[n];
  gpus.assign(cluster_now().nodes[n].gpus.size(), {});
  for (const GpuReport& g : agents_[n].gpus)
    if (g.gpu < static_cast<int>(gpus.size())) gpus[g.gpu] = {g.fb_used_mib, g.util_percent};
  if (!images) return;
  t->node_images[n].clear();
  t->node_layers[n].clear();
  for (const ReportedImage& image : agents_[n].images) {
    for (const std::string& name : image.names)
      t->node_images[n].push_back(NormalizedImageName(name));
    for (const ImageLayer& l : image.layers) t->node_layers[n].insert(l.digest);
  }
}

std::map<std::string, std::vector<ImageLayer>> ControlPlane::KnownImageLayers() const {
  std::map<std::string, std::vector<ImageLayer>> known;
  for (const AgentNode& agent : agents_)
    for (const ReportedImage& image : agent.images)
      for (const std::string& name : image.names)
        known.try_emplace(NormalizedImageName(name), image.layers);
  return known;
}

void ControlPlane::FinishStopped(Job& job) {
  engine_->Finish(job.engine_id, now_(),
                  job.stored.state == "failed" ? JobEnd::kFailed : JobEnd::kCancelled,
                  job.stored.exit_code);
  by_engine_id_.erase(job.engine_id);
  job.engine_id = -1;
  job.stored.placements.clear();
  Touch(job);
}

bool ControlPlane::StoppedEverywhere(const Job& job) const {
  const auto placements = ParsePlacements(job.stored.placements);
  if (!placements) return true;
  // Every replica reported ended, or on a node that is lost or has no agent (nothing runs it
  // there; an agent expected back after a restart, on a node that ran jobs, may still run it).
  for (size_t i = 0; i < placements->size(); ++i) {
    const auto r = job.replicas.find(static_cast<int>(i));
    const AgentNode& there = agents_[(*placements)[i].node];
    if ((r == job.replicas.end() || Live(r->second)) && (there.registered || there.may_run_jobs) &&
        !there.lost)
      return false;
  }
  return true;
}

void ControlPlane::ReportOn(Job& job, int node, const AgentReport& report,
                            const std::map<std::pair<int64_t, int>, const ContainerReport*>& mine,
                            double now, std::vector<StoreWrite>* writes, bool lost) {
  const auto placements = ParsePlacements(job.stored.placements);
  if (!placements) return;
  const std::string& name = cluster_now().nodes[node].name;
  const auto version = job.node_version.find(node);
  // Until the agent has acted on the version that handed out (or took away) this job, a
  // container missing or still running is a change it has not made yet.
  const bool acted = version != job.node_version.end() && report.applied_version >= version->second;
  std::vector<int> here;  // replica indices on this node
  for (size_t i = 0; i < placements->size(); ++i)
    if ((*placements)[i].node == node) here.push_back(static_cast<int>(i));
  if (here.empty()) return;

  if (job.stored.state == "preempted" || job.stored.state == "stopped" ||
      job.stored.state == "failed") {
    if (!acted) return;
    for (int i : here)
      if (const auto c = mine.find({job.stored.id, i}); c != mine.end() && Live(*c->second)) return;
    for (int i : here) {
      // Its end as its agent reports it, exit code and all; one no longer reported is gone
      // (where its agent reported it ended, that report stands).
      ContainerReport& replica = job.replicas[i];
      if (const auto c = mine.find({job.stored.id, i}); c != mine.end()) {
        std::map<std::string, double> phases = std::move(replica.phases);  // as ReportOn keeps
        replica = *c->second;
        for (auto& [phase, seconds] : phases) replica.phases.try_emplace(phase, seconds);
      } else if (replica.state.empty() || Live(replica))
        replica.state = "gone";
    }
    if (!StoppedEverywhere(job)) return;
    if (job.stored.state != "preempted") {
      // A failed job's reason keeps what failed it (its first part, ReportOn below).
      const std::string cause =
          job.stored.state == "failed"
              ? job.stored.reason.substr(0, job.stored.reason.find("; ")) + "; "
              : "";
      FinishStopped(job);
      // On a lost node nobody saw them stop (review: it said they had).
      Record(job, job.stored.state,
             cause + (lost ? "its GPUs are free: node " + name +
                                 " was lost (an agent that comes back there stops its containers)"
                           : "its containers have stopped; its GPUs are free"),
             writes);
      return;
    }
    const std::vector<Decision> starts = engine_->Stopped(job.engine_id, now);
    job.stored.placements.clear();
    Record(job, "pending",
           lost ? "node " + name + " was lost after its preemption; waiting again"
                : "its containers stopped after its preemption; waiting again",
           writes);
    Apply(starts, writes);
    return;
  }

  for (int i : here) {
    const auto c = mine.find({job.stored.id, i});
    if (c == mine.end()) {
      if (acted) {
        Requeue(job, "lost",
                "its container on " + name + " (replica " + std::to_string(i) + ") is gone", now,
                writes);
        return;
      }
      continue;
    }
    ContainerReport& last = job.replicas[i];
    const bool same_run = last.placement == c->second->placement;
    // The run's start phases, each the first time a report carries it (a quick job may be
    // seen first exited; its first line comes after its start), unless a server before this
    // one counted them. Only the phases agents time: any other name would grow the metrics.
    const bool counted_before = job.adopted && last.placement.empty();
    for (const auto& [phase, seconds] : c->second->phases)
      if (!counted_before && (!same_run || !last.phases.count(phase)) &&
          (phase == "pull" || phase == "create" || phase == "start" || phase == "firstLog"))
        start_phases_.try_emplace(phase, StartPhaseBuckets()).first->second.Observe(seconds);
    // An agent restarted since forgot the phases it timed: those it reported stay.
    std::map<std::string, double> phases = same_run ? std::move(last.phases) : decltype(phases)();
    last = *c->second;
    for (auto& [phase, seconds] : phases) last.phases.try_emplace(phase, seconds);
    if (last.state == "failed" && ++job.start_failures >= kMaxStartFailures) {
      engine_->Finish(job.engine_id, now, JobEnd::kFailed, 0);
      by_engine_id_.erase(job.engine_id);
      job.engine_id = -1;
      job.stored.placements.clear();
      Record(job, "failed",
             "could not be started " + std::to_string(kMaxStartFailures) + " times; last, on " +
                 name + ": " + last.error.substr(0, 500),
             writes);
      return;
    }
    if (last.state == "interrupted") {
      Requeue(job, "lost",
              "its container on " + name + " (replica " + std::to_string(i) +
                  ") was stopped by the node's container engine, not by berth (the engine's "
                  "shutdown, or a docker stop by hand); running it again after a back-off",
              now, writes);
      return;
    }
    if (last.state == "failed") {
      Requeue(job, "pending",
              "could not be started on " + name + ": " + last.error.substr(0, 500) +
                  "; retrying with back-off",
              now, writes);
      return;
    }
  }
  // The job as a whole: it fails as soon as one replica fails (the others are stopped), and
  // succeeds when every replica exited 0. A quick job may be seen first exited: it ran, and its
  // history says so before it says how it ended.
  const auto ran = [&] {
    if (job.stored.state != "running")
      Record(job, "running", "its container ran on " + name + " (seen first exited)", writes);
  };
  int exited = 0, running = 0;
  for (size_t i = 0; i < placements->size(); ++i) {
    const auto r = job.replicas.find(static_cast<int>(i));
    if (r == job.replicas.end()) continue;
    if (r->second.state == "running") ++running;
    if (r->second.state != "exited") continue;
    ++exited;
    if (r->second.exit_code != 0) {
      ran();
      job.stored.exit_code = r->second.exit_code;
      const std::string why = "replica " + std::to_string(i) + " exited with code " +
                              std::to_string(r->second.exit_code);
      if (!StoppedEverywhere(job)) {
        // As a stop on request: the other replicas' GPUs stay held, and their last output is
        // taken, until their containers have stopped (then the job's end is final).
        engine_->Stopping(job.engine_id, now, why);
        Record(job, "failed", why + "; its other replicas are stopping (their GPUs are held)",
               writes);
        return;
      }
      engine_->Finish(job.engine_id, now, JobEnd::kFailed, r->second.exit_code);
      by_engine_id_.erase(job.engine_id);
      job.engine_id = -1;
      job.stored.placements.clear();
      Record(job, "failed", why, writes);
      return;
    }
  }
  if (exited == static_cast<int>(placements->size())) {
    ran();
    engine_->Finish(job.engine_id, now, JobEnd::kSucceeded, 0);
    by_engine_id_.erase(job.engine_id);
    job.engine_id = -1;
    job.stored.exit_code = 0;
    job.stored.placements.clear();
    Record(job, "succeeded", "every replica exited with code 0", writes);
  } else if ((running > 0 || exited > 0) && job.stored.state != "running") {
    job.start_failures = 0;
    Record(job, "running", "its container runs on " + name, writes);
  } else if (job.stored.state == "scheduled" && !job.replicas.empty()) {
    Record(job, "starting", "its image is pulled and its container created on " + name, writes);
  }
}

void ControlPlane::Requeue(Job& job, const std::string& state, const std::string& reason,
                           double now, std::vector<StoreWrite>* writes, bool node_lost) {
  if (node_lost)
    engine_->NodeLost(job.engine_id, now, reason);
  else
    engine_->StartFailed(job.engine_id, now, reason);
  job.stored.placements.clear();
  if (state != "pending") {
    Record(job, state, reason, writes);
    Record(job, "pending", "waiting again after it was " + state, writes);
  } else {
    Record(job, "pending", reason, writes);
  }
}

void ControlPlane::CheckAgents(double now, std::vector<StoreWrite>* writes) {
  for (size_t i = 0; i < agents_.size(); ++i) {
    AgentNode& agent = agents_[i];
    if (!agent.registered && !agent.expected) continue;
    const int n = static_cast<int>(i);
    const std::string& name = cluster_now().nodes[n].name;
    const double silent = now - agent.last_seen;
    const double engine_away = agent.engine_away_since < 0 ? 0 : now - agent.engine_away_since;
    const double down = std::max(silent, engine_away);
    const std::string cause =
        silent < engine_away
            ? "its agent cannot reach the container engine (" + agent.engine_error + ")"
        : agent.registered ? "no report from its agent"
                           : "its agent has not registered since the server started";
    const auto mark = [&](const std::string& event, const std::string& reason) {
      writes->push_back(
          StoreWrite::Node({name, engine_->allocator().node_cordoned(n) && !agent.cordoned_by_us},
                           event, now, reason));
    };
    if (down < unhealthy_after_s_) {
      if (!agent.unhealthy && !agent.lost) continue;
      agent.unhealthy = agent.lost = false;
      if (agent.cordoned_by_us) Apply(engine_->SetNodeCordoned(n, false, now), writes);
      agent.cordoned_by_us = false;
      mark("healthy", agent.down_before_registering
                          ? "its agent reports, for the first time since the server started"
                          : "its agent reports again, with its containers");
      continue;
    }
    if (!agent.unhealthy) {
      agent.unhealthy = true;
      agent.down_before_registering = !agent.registered;
      // No new jobs go to a node nobody watches; the operator's own cordon is left alone.
      if (!engine_->allocator().node_cordoned(n)) {
        Apply(engine_->SetNodeCordoned(n, true, now), writes);
        agent.cordoned_by_us = true;
      }
      mark("unhealthy", cause + " for " + Seconds(down) +
                            " s: no new jobs go there; its jobs are placed elsewhere after " +
                            Seconds(lost_after_s_) + " s");
    }
    // An agent that registered since is back, its first report moments away: not lost.
    const double unheard =
        std::max(now - std::max(agent.last_seen, agent.registered_at), engine_away);
    if (unheard >= lost_after_s_ && !agent.lost) {
      agent.lost = true;
      mark("lost", cause + " for " + Seconds(down) + " s: its jobs are placed again elsewhere");
      const std::set<int64_t> placed = on_node_[n];
      for (int64_t id : placed)
        Requeue(jobs_.at(id), "lost", "node " + name + " was lost (" + cause + ")", now, writes,
                /*node_lost=*/true);
      // Jobs stopping there count as stopped; an agent that comes back stops their containers.
      AgentReport none;
      none.applied_version = UINT64_MAX;
      const std::set<int64_t> stopping = stopping_;
      for (int64_t id : stopping) ReportOn(jobs_.at(id), n, none, {}, now, writes, /*lost=*/true);
    }
  }
}

std::string ControlPlane::Logs(int64_t id, int64_t offset, size_t max, double wait_s, int64_t* next,
                               StderrSpans* stderr_spans) const {
  Get(id);  // 404 for an unknown job
  *next = offset;
  if (stderr_spans != nullptr) stderr_spans->clear();
  if (logs_ == nullptr) return "";
  std::string text = logs_->Read(id, offset, max, next, stderr_spans);
  if (text.empty() && wait_s > 0) {
    logs_->WaitPast(id, offset, wait_s);
    text = logs_->Read(id, offset, max, next, stderr_spans);
  }
  return text;
}

namespace {

// A pending engine job's reason to wait. In the engine, so past a cycle: one that left it no
// reason passed it over because jobs of its shape, or smaller, found no room (the deep queue's
// bound).
std::string WaitingReason(const JobRecord& record) {
  return record.reason.empty() ? "no capacity fits the job" : record.reason;
}

}  // namespace

std::string ControlPlane::WhyWaiting(int64_t id) const {
  std::lock_guard<std::mutex> engine_lock(engine_mu_);
  std::lock_guard<std::mutex> lock(mu_);
  const Job& job = Find(id);
  if (job.stored.state == "scheduled") return StartBlocker(job);
  if (job.stored.state != "pending" || job.engine_id < 0) return "";
  const JobRecord* record = engine_->job(job.engine_id);
  if (record == nullptr || record->state != JobState::kPending) return "";
  return WaitingReason(*record);
}

std::string ControlPlane::StartBlocker(const Job& job) const {
  for (int n : NodesOf(job.stored.placements))
    if (static_cast<size_t>(n) < agents_.size() && !agents_[n].engine_error.empty())
      return job.stored.reason + "; not started: the agent of node " + cluster_now().nodes[n].name +
             " cannot reach its container engine (" + agents_[n].engine_error + ")";
  return "";
}

void ControlPlane::RefreshWaiting(double now) {
  if (now - waiting_refreshed_ < 1) return;
  waiting_refreshed_ = now;
  for (const auto& [engine_id, record] : engine_->jobs()) {
    if (record.state != JobState::kPending) continue;
    const auto id = by_engine_id_.find(engine_id);
    if (id == by_engine_id_.end()) continue;
    Job& job = jobs_.at(id->second);
    if (job.stored.state == "pending") job.waiting = WaitingReason(record);
  }
}

std::map<int, ContainerReport> ControlPlane::Replicas(int64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Job& job = Find(id);
  std::map<int, ContainerReport> replicas = job.replicas;
  if (job.queued_s >= 0)
    for (auto& [replica, report] : replicas) report.phases["queued"] = job.queued_s;
  return replicas;
}

std::vector<ControlPlane::AgentStatus> ControlPlane::Agents() const {
  std::lock_guard<std::mutex> lock(mu_);
  const double now = now_();
  std::vector<AgentStatus> out;
  for (size_t n = 0; n < agents_.size(); ++n)
    out.push_back(AgentStatusOf(static_cast<int>(n), now));
  return out;
}

ControlPlane::AgentStatus ControlPlane::AgentStatusOf(int node, double now) const {
  const AgentNode& a = agents_[node];
  return {a.registered,
          a.registration.simulated,
          a.unhealthy,
          a.lost,
          a.engine_error,
          a.registered || a.expected ? now - a.last_seen : -1,
          a.topology_mismatch,
          a.off_gpus,
          static_cast<int>(a.images.size()),
          a.image_bytes};
}

std::vector<double> ControlPlane::StartPhaseBuckets() {
  return {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
}

}  // namespace berth
