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

LogStore::LogStore(std::string dir) : dir_(std::move(dir)) {
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error)
    throw StoreError("cannot create the log directory " + dir_ + ": " + error.message() +
                     "; check the state directory's permissions");
}

std::string LogStore::LogPath(int64_t job) const {
  return dir_ + "/" + std::to_string(job) + ".log";
}

std::string LogStore::CursorPath(int64_t job) const {
  return dir_ + "/" + std::to_string(job) + ".cursor";
}

void LogStore::LoadCursors(int64_t job) {
  if (loaded_[job]) return;
  loaded_[job] = true;
  // One line per replica run: "REPLICA PLACEMENT TIMESTAMP".
  std::ifstream in(CursorPath(job));
  int replica = 0;
  std::string placement, until;
  while (in >> replica >> placement >> until) cursors_[{job, replica, placement}] = until;
}

void LogStore::Append(int64_t job, int replica, const std::string& placement,
                      const std::string& until, const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  LoadCursors(job);
  std::string& cursor = cursors_[{job, replica, placement}];
  if (until.empty() || until <= cursor || placement.empty() ||
      placement.find_first_of(" \n") != std::string::npos)
    return;
  struct stat st {};
  const int64_t size = ::stat(LogPath(job).c_str(), &st) == 0 ? st.st_size : 0;
  if (size < kMaxJobLogBytes) {
    std::ofstream out(LogPath(job), std::ios::app | std::ios::binary);
    if (size + static_cast<int64_t>(text.size()) < kMaxJobLogBytes)
      out << text;
    else  // what fits, so that the log is full after the last line and nothing follows it
      out << text.substr(0, static_cast<size_t>(kMaxJobLogBytes - size))
          << "\n[berth: this job's log reached " << (kMaxJobLogBytes >> 20)
          << " MiB; later output is not kept]\n";
  }
  cursor = until;
  std::ostringstream cursors;
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
}

std::string LogStore::Cursor(int64_t job, int replica, const std::string& placement) {
  std::lock_guard<std::mutex> lock(mu_);
  LoadCursors(job);
  const auto it = cursors_.find({job, replica, placement});
  return it == cursors_.end() ? "" : it->second;
}

std::string LogStore::Read(int64_t job, int64_t offset, size_t max, int64_t* next) const {
  std::ifstream in(LogPath(job), std::ios::binary);
  *next = offset;
  if (!in) return "";
  in.seekg(offset);
  std::string out(max, '\0');
  in.read(out.data(), static_cast<std::streamsize>(max));
  out.resize(static_cast<size_t>(in.gcount()));
  *next = offset + static_cast<int64_t>(out.size());
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
  cursors_.erase(cursors_.lower_bound({job, 0, ""}), cursors_.lower_bound({job + 1, 0, ""}));
  loaded_.erase(job);
}

}  // namespace berth
