#include "agent/exit_cause.h"

namespace berth {

ExitCause ExitCauseOf(const ExitEvidence& e) {
  if (e.stopped_by_agent) return ExitCause::kJob;
  if (e.signalled_s && e.finished_s >= *e.signalled_s - kKillStampedLateS &&
      e.finished_s <= *e.signalled_s + e.grace_s + kSignalToExitSlackS)
    return ExitCause::kEngine;
  if (e.finished_s > e.events_seen_until_s && e.seen_exited_s < kEventWaitS)
    return ExitCause::kNotKnownYet;
  return ExitCause::kJob;
}

}  // namespace berth
