#include "agent/exit_cause.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

// A container that exited at t=1000, everything seen up to then.
ExitEvidence Exited() {
  ExitEvidence e;
  e.finished_s = 1000;
  e.events_seen_until_s = 1000.5;
  e.seen_exited_s = 0;
  return e;
}

TEST(ExitCauseTest, AnExitWithNoSignalIsTheJobsOwn) {
  EXPECT_EQ(ExitCauseOf(Exited()), ExitCause::kJob);
}

TEST(ExitCauseTest, AnExitAfterTheEnginesSignalIsTheEngines) {
  ExitEvidence e = Exited();
  e.signalled_s = 999.8;  // SIGTERM, and the trap exited
  EXPECT_EQ(ExitCauseOf(e), ExitCause::kEngine);
  e.grace_s = 10;
  e.signalled_s = 1000 - 10 - 2;  // killed when the stop timeout was over
  EXPECT_EQ(ExitCauseOf(e), ExitCause::kEngine);
  // The kill event is stamped after the signal went: a SIGKILLed process may be stamped
  // exited first.
  e.signalled_s = 1000.01;
  EXPECT_EQ(ExitCauseOf(e), ExitCause::kEngine);
}

TEST(ExitCauseTest, AStopTheAgentAskedForIsNotTheEngines) {
  ExitEvidence e = Exited();
  e.signalled_s = 999.8;
  e.stopped_by_agent = true;
  EXPECT_EQ(ExitCauseOf(e), ExitCause::kJob);
}

TEST(ExitCauseTest, ASignalLongBeforeTheExitDidNotEndIt) {
  // A signal the job survived (its grace is 30 s, plus the slack), and exited later by itself.
  ExitEvidence e = Exited();
  e.grace_s = 30;
  e.signalled_s = 1000 - 30 - kSignalToExitSlackS - 1;
  EXPECT_EQ(ExitCauseOf(e), ExitCause::kJob);
  // Nor one after it (a stop of the exited container).
  e.signalled_s = 1000 + kKillStampedLateS + 1;
  EXPECT_EQ(ExitCauseOf(e), ExitCause::kJob);
}

TEST(ExitCauseTest, AnExitPastTheEventsSeenWaitsForThemAFewSecondsAtMost) {
  ExitEvidence e = Exited();
  e.events_seen_until_s = 999;  // the watch is behind the exit
  EXPECT_EQ(ExitCauseOf(e), ExitCause::kNotKnownYet);
  e.signalled_s = 999.5;  // a signal already seen decides
  EXPECT_EQ(ExitCauseOf(e), ExitCause::kEngine);
  e.signalled_s.reset();
  // Counted from when the agent saw the exit: one the engine's API was away for is seen long
  // after it happened, and still waits for the events (review: the watch was in its back-off,
  // and jobs the engine stopped as it went ended succeeded).
  e.seen_exited_s = kEventWaitS - 1;
  EXPECT_EQ(ExitCauseOf(e), ExitCause::kNotKnownYet);
  e.seen_exited_s = kEventWaitS;  // a watch that cannot keep up does not hold the end for ever
  EXPECT_EQ(ExitCauseOf(e), ExitCause::kJob);
}

}  // namespace
}  // namespace berth
