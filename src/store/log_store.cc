#include "store/log_store.h"

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "store/state_store.h"

namespace berth {

std::string LogStore::LogPath(int64_t job) const {
  return dir_ + "/" + std::to_string(job) + ".log";
}

std::string LogStore::CursorPath(int64_t job) const {
  return dir_ + "/" + std::to_string(job) + ".cursor";
}

std::string LogStore::StreamsPath(int64_t job) const {
  return dir_ + "/" + std::to_string(job) + ".streams";
}

namespace {

constexpr size_t kSwitchBytes = 8;

int64_t SwitchAt(const char* bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < kSwitchBytes; ++i)
    v |= uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  return static_cast<int64_t>(v);
}

// The i-th switch of an open streams file; -1 when it cannot be read.
int64_t ReadSwitch(std::ifstream& in, int64_t i) {
  char bytes[kSwitchBytes];
  in.clear();
  in.seekg(i * static_cast<int64_t>(kSwitchBytes));
  if (!in.read(bytes, kSwitchBytes)) return -1;
  return SwitchAt(bytes);
}

int64_t FileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

}  // namespace

LogStore::LogStore(std::string dir) : dir_(std::move(dir)) {
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error)
    throw StoreError("cannot create the log directory " + dir_ + ": " + error.message() +
                     "; check the state directory's permissions");
  // Text appended after the last cursor written (a crash between the two writes) was never
  // taken: its sender sends it again, from the cursor.
  for (const auto& entry : std::filesystem::directory_iterator(dir_, error)) {
    const std::filesystem::path& path = entry.path();
    if (path.extension() != ".log") continue;
    int64_t job = 0;
    try {
      job = std::stoll(path.stem().string());
    } catch (const std::exception&) {
      continue;  // not one of ours
    }
    std::error_code ignored;
    if (const int64_t committed = CommittedLength(job);
        committed >= 0 && FileSize(path) > committed)
      std::filesystem::resize_file(path, static_cast<uintmax_t>(committed), ignored);
  }
}

void LogStore::AddSwitches(int64_t job, int64_t size, const std::string& text,
                           const StderrSpans& stderr_spans) {
  const std::string path = StreamsPath(job);
  int64_t count = FileSize(path) / static_cast<int64_t>(kSwitchBytes);
  {
    // Switches past the log's end are of text never written (a crash between the two writes).
    std::ifstream in(path, std::ios::binary);
    int64_t kept = count;
    while (kept > 0 && ReadSwitch(in, kept - 1) >= size) --kept;
    if (kept != count || FileSize(path) != count * static_cast<int64_t>(kSwitchBytes)) {
      std::error_code ignored;
      std::filesystem::resize_file(path, kept * kSwitchBytes, ignored);
      count = kept;
    }
  }
  bool on_stderr = count % 2 == 1;
  std::string switches;
  auto switch_to = [&](bool to_stderr, size_t at) {
    if (to_stderr == on_stderr || at >= text.size() || count >= kMaxStreamSwitches) return;
    const auto v = static_cast<uint64_t>(size + static_cast<int64_t>(at));
    for (size_t i = 0; i < kSwitchBytes; ++i) switches += static_cast<char>(v >> (8 * i));
    on_stderr = to_stderr;
    ++count;
  };
  size_t end = 0;  // of the last stderr span
  for (const auto& [from, to] : stderr_spans) {
    if (from > end) switch_to(false, end);
    switch_to(true, from);
    end = to;
  }
  switch_to(false, end);
  if (switches.empty()) return;
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out << switches;
}

// The cursor file: "length N" (the log's length when it was written), then one line per
// replica run, "REPLICA PLACEMENT TIMESTAMP".
void LogStore::LoadCursors(int64_t job) {
  if (loaded_[job]) return;
  loaded_[job] = true;
  std::ifstream in(CursorPath(job));
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    int replica = 0;
    std::string placement, until;
    if (fields >> replica >> placement >> until) cursors_[{job, replica, placement}] = until;
  }
}

int64_t LogStore::CommittedLength(int64_t job) const {
  std::ifstream in(CursorPath(job));
  if (!in) return 0;  // no chunk was taken
  std::string word;
  int64_t length = 0;
  return in >> word >> length && word == "length" ? length : -1;
}

bool LogStore::Append(int64_t job, int replica, const std::string& placement,
                      const std::string& from, const std::string& until, const std::string& chunk,
                      const StderrSpans& chunk_spans) {
  std::lock_guard<std::mutex> lock(mu_);
  LoadCursors(job);
  // A placement with a space or a newline would break the cursor file.
  if (placement.empty() || placement.find_first_of(" \n") != std::string::npos) return true;
  const Run run{job, replica, placement};
  const auto stored = cursors_.find(run);
  if (from != (stored == cursors_.end() ? "" : stored->second)) return false;
  if (until.empty() || until <= from) return true;
  std::string& cursor = cursors_[run];
  std::string text;
  StderrSpans stderr_spans;
  if (const auto mid = mid_line_.find(job); mid != mid_line_.end() && mid->second != run) {
    text = "\n";  // ends the other run's line
    for (const auto& [begin, end] : chunk_spans) stderr_spans.emplace_back(begin + 1, end + 1);
  } else {
    stderr_spans = chunk_spans;
  }
  text += chunk;
  if (!text.empty() && text.back() != '\n')
    mid_line_[job] = run;
  else if (!text.empty())
    mid_line_.erase(job);
  const int64_t size = FileSize(LogPath(job));
  if (size + static_cast<int64_t>(text.size()) < kMaxJobLogBytes) {
    // The switches are written first: a reader takes only those inside the text it read.
    AddSwitches(job, size, text, stderr_spans);
    std::ofstream(LogPath(job), std::ios::app | std::ios::binary) << text;
  } else if (size < kMaxJobLogBytes) {
    // What fits, so that the log is full after the last line (on stderr) and nothing follows.
    std::string last = text.substr(0, static_cast<size_t>(kMaxJobLogBytes - size));
    StderrSpans spans;
    for (const auto& [from, to] : stderr_spans)
      if (from < last.size()) spans.emplace_back(from, std::min(to, last.size()));
    const size_t note = last.size();
    last += "\n[berth: this job's log reached " + std::to_string(kMaxJobLogBytes >> 20) +
            " MiB; later output is not kept]\n";
    spans.emplace_back(note, last.size());
    AddSwitches(job, size, last, spans);
    std::ofstream(LogPath(job), std::ios::app | std::ios::binary) << last;
  }
  cursor = until;
  std::ostringstream cursors;
  cursors << "length " << FileSize(LogPath(job)) << '\n';
  for (auto it = cursors_.lower_bound({job, 0, ""});
       it != cursors_.end() && std::get<0>(it->first) == job; ++it)
    cursors << std::get<1>(it->first) << ' ' << std::get<2>(it->first) << ' ' << it->second << '\n';
  const std::string tmp = CursorPath(job) + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << cursors.str();
  }
  std::rename(tmp.c_str(), CursorPath(job).c_str());
  grew_.notify_all();
  return true;
}

bool LogStore::Full(int64_t job) const {
  std::lock_guard<std::mutex> lock(mu_);
  return FileSize(LogPath(job)) >= kMaxJobLogBytes;
}

std::string LogStore::Cursor(int64_t job, int replica, const std::string& placement) {
  std::lock_guard<std::mutex> lock(mu_);
  LoadCursors(job);
  const auto it = cursors_.find({job, replica, placement});
  return it == cursors_.end() ? "" : it->second;
}

std::string LogStore::Read(int64_t job, int64_t offset, size_t max, int64_t* next,
                           StderrSpans* stderr_spans) const {
  if (stderr_spans != nullptr) stderr_spans->clear();
  std::ifstream in(LogPath(job), std::ios::binary);
  *next = offset;
  if (!in) return "";
  in.seekg(offset);
  std::string out(max, '\0');
  in.read(out.data(), static_cast<std::streamsize>(max));
  out.resize(static_cast<size_t>(in.gcount()));
  *next = offset + static_cast<int64_t>(out.size());
  if (stderr_spans == nullptr || out.empty()) return out;
  // The first switch after `offset` (a binary search), then each one inside the text.
  std::ifstream streams(StreamsPath(job), std::ios::binary);
  int64_t lo = 0, hi = FileSize(StreamsPath(job)) / static_cast<int64_t>(kSwitchBytes);
  const int64_t count = hi;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    const int64_t at = ReadSwitch(streams, mid);
    if (at >= 0 && at <= offset)
      lo = mid + 1;
    else
      hi = mid;
  }
  bool on_stderr = lo % 2 == 1;
  int64_t from = offset;
  streams.clear();
  streams.seekg(lo * static_cast<int64_t>(kSwitchBytes));
  char bytes[kSwitchBytes];
  for (int64_t i = lo; i < count && streams.read(bytes, kSwitchBytes); ++i) {  // in order
    const int64_t at = SwitchAt(bytes);
    if (at >= *next) break;
    if (on_stderr && at > from)
      stderr_spans->emplace_back(static_cast<size_t>(from - offset),
                                 static_cast<size_t>(at - offset));
    on_stderr = !on_stderr;
    from = at;
  }
  if (on_stderr && from < *next)
    stderr_spans->emplace_back(static_cast<size_t>(from - offset),
                               static_cast<size_t>(*next - offset));
  return out;
}

void LogStore::WaitPast(int64_t job, int64_t offset, double wait_s) const {
  std::unique_lock<std::mutex> lock(mu_);
  grew_.wait_for(lock, std::chrono::duration<double>(wait_s), [&] {
    struct stat st {};
    return ::stat(LogPath(job).c_str(), &st) == 0 && st.st_size > offset;
  });
}

void LogStore::Remove(int64_t job) {
  std::lock_guard<std::mutex> lock(mu_);
  std::remove(LogPath(job).c_str());
  std::remove(CursorPath(job).c_str());
  std::remove(StreamsPath(job).c_str());
  cursors_.erase(cursors_.lower_bound({job, 0, ""}), cursors_.lower_bound({job + 1, 0, ""}));
  loaded_.erase(job);
  mid_line_.erase(job);
}

}  // namespace berth
