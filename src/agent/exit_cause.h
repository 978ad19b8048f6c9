// Why a container of the agent's exited: by itself (the job's own end, or a stop the agent
// asked for), or because its engine signalled it to stop (SIGTERM, SIGKILL, SIGINT or SIGQUIT;
// other signals ask a job for something else) unasked by the agent. A Docker engine that shuts down
// stops its containers (unless it runs with live-restore), and a `docker stop` by hand does the
// same; a job whose SIGTERM trap exits 0 would then end "succeeded", and others "failed" with
// 143, though nothing was wrong with them. The engine's "kill" events tell (the agent watches
// them: DockerClient::WaitForExit), but only once they have been seen up to the exit: until
// then, for a few seconds at most, the cause is not known yet.
#pragma once

#include <optional>

namespace berth {

enum class ExitCause {
  kJob,          // exited by itself, or the agent stopped it
  kEngine,       // its engine signalled it, unasked by the agent, and it exited of that
  kNotKnownYet,  // the engine's events up to its exit have not been seen yet
};

// What is known of an exited container. Times are seconds since the epoch on the engine's
// clock (this host's).
struct ExitEvidence {
  double finished_s = 0;              // its State.FinishedAt; 0 when unknown
  std::optional<double> signalled_s;  // the engine's last kill event for it, when seen
  bool stopped_by_agent = false;      // the agent asked the engine to stop it
  double grace_s = 30;                // its job's grace period (the engine's stop timeout)
  double events_seen_until_s = 0;     // every engine event before this has been seen
  double seen_exited_s = 0;           // how long the agent has seen it exited
};

// A signal counts when the exit follows it within the grace period and some slack (the engine
// kills once its stop timeout is over); a later exit is the job's own. The engine stamps its
// kill event after sending the signal, so the exit may come stamped a little before it.
// Events are waited for at most kEventWaitS from when the agent saw the exit (not from the
// exit: one while the engine's API was away is seen late, and its events come after): a watch
// that cannot keep up must not hold a job's end for ever.
constexpr double kSignalToExitSlackS = 30, kKillStampedLateS = 5, kEventWaitS = 5;

ExitCause ExitCauseOf(const ExitEvidence& e);

}  // namespace berth
