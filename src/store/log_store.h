// Jobs' container output, as node agents send it: one file per job under DIR (DIR/<job>.log,
// the replicas' lines in the order they arrive), and beside it the last timestamp stored of each
// replica run (DIR/<job>.cursor), so that an agent that resends, or that starts again after a
// restart of either side, neither repeats nor loses lines (Append).
//
// Which bytes a job wrote to stderr is kept beside its log too (DIR/<job>.streams: the offsets
// where the text switches stream, as 8-byte little-endian integers; a log starts on stdout),
// at most kMaxStreamSwitches a job: past them, the rest stays on the stream it was on.
//
// Replicas' lines never run together: a chunk from another replica run than the last one
// written, after text that did not end its line (a line the engine split, or a run killed
// mid-line), starts on a new line.
//
// Bounded: a job's log stops growing at kMaxJobLogBytes, with a last line saying so. Not
// synced to disk: output is not state, and a lost tail is sent again. The cursor file, written
// after the text, holds the log's length: a store that starts cuts text past it (a crash
// between the two writes), which its sender sends again from the cursor.
//
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "protocol/log_frames.h"

namespace berth {

class LogStore {
 public:
  static constexpr int64_t kMaxJobLogBytes = 64 << 20;
  static constexpr int64_t kMaxStreamSwitches = 1 << 20;

  explicit LogStore(std::string dir);  // creates DIR; throws StoreError when it cannot

  // Appends a chunk of a replica run read on from `from` (the cursor as its sender knew it; ""
  // for the run's start) whose last line is stamped `until` (normalized timestamps,
  // agent_protocol.h). False, appending nothing, when the stored cursor is not `from`: the sender
  // is to read again from Cursor(), so that a chunk overlapping what is stored (a resend, or more
  // lines after one) repeats no line, and a tail lost in a crash is sent again. A chunk not past
  // `from`, or without a time or a placement, is dropped.
  bool Append(int64_t job, int replica, const std::string& placement, const std::string& from,
              const std::string& until, const std::string& text,
              const StderrSpans& stderr_spans = {});
  // The job's log has reached kMaxJobLogBytes: it keeps no more.
  bool Full(int64_t job) const;
  // The last timestamp stored of the replica run; "" when none.
  std::string Cursor(int64_t job, int replica, const std::string& placement);
  // Up to `max` bytes of the job's log from `offset`; `*next` is the offset after them. With
  // `stderr_spans`, also what of them was written to stderr.
  std::string Read(int64_t job, int64_t offset, size_t max, int64_t* next,
                   StderrSpans* stderr_spans = nullptr) const;
  // Returns once the job's log is longer than `offset`, or after `wait_s`.
  void WaitPast(int64_t job, int64_t offset, double wait_s) const;
  void Remove(int64_t job);

 private:
  using Run = std::tuple<int64_t, int, std::string>;  // job, replica, placement
  std::string LogPath(int64_t job) const;
  std::string CursorPath(int64_t job) const;
  std::string StreamsPath(int64_t job) const;
  // Records where `text`, about to be appended to a log of `size` bytes, switches stream.
  void AddSwitches(int64_t job, int64_t size, const std::string& text,
                   const StderrSpans& stderr_spans);  // mu_ held
  void LoadCursors(int64_t job);                      // mu_ held
  // The log's length when its cursors were last written: text past it was never taken. 0
  // without a cursor file; -1 for one that does not say (written by an older berth).
  int64_t CommittedLength(int64_t job) const;

  const std::string dir_;
  mutable std::mutex mu_;
  mutable std::condition_variable grew_;
  std::map<Run, std::string> cursors_;
  std::map<int64_t, bool> loaded_;  // jobs whose cursor file was read
  // Per job since this store began: the run that wrote last, when its text did not end its
  // line.
  std::map<int64_t, Run> mid_line_;
};

}  // namespace berth
