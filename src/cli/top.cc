// `berth top`: a live view of the cluster in the terminal, as top shows processes: each node's
// GPUs as a row of cells (held, free, bad), and each queue's usage against its fair share and
// guarantee. It redraws every --interval seconds until interrupted (into a pipe or a file it
// writes each frame after the last, without terminal codes); --once draws one frame (scripts,
// tests), and --format json prints once what a frame is drawn from.
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"

namespace berth {
namespace {

using Json = nlohmann::json;

struct TopArgs {
  std::string format = "table";
  bool once = false;
  double interval_s = 2;
};

// A bar `width` wide: `used` of `total` as '#', the rest '-', and '|' at `mark` (the fair
// share) when it falls inside.
std::string Bar(double used, double mark, double total, int width) {
  std::string bar(width, '-');
  if (total <= 0) return bar;
  const int filled = std::clamp(static_cast<int>(std::lround(used / total * width)), 0, width);
  std::fill(bar.begin(), bar.begin() + filled, '#');
  const int at = static_cast<int>(std::lround(mark / total * width));
  if (at > 0 && at < width) bar[at] = '|';
  return bar;
}

std::string Fixed(double value) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << value;
  return out.str();
}

std::string Frame() {
  const Json nodes = CallServer("GET", "/v1/nodes")["nodes"];
  const Json queues = CallServer("GET", "/v1/queues")["queues"];
  std::ostringstream out;
  const std::time_t now = std::time(nullptr);
  char clock[32];
  std::strftime(clock, sizeof clock, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  size_t name_width = 4, total = 0, held = 0, bad = 0;
  for (const Json& n : nodes) {
    name_width = std::max(name_width, n["name"].get<std::string>().size());
    const std::string map = n["gpuMap"];
    total += map.size();
    held += std::count(map.begin(), map.end(), '#');
    bad += std::count(map.begin(), map.end(), 'x');
  }
  for (const Json& q : queues)
    name_width = std::max(name_width, q["name"].get<std::string>().size());
  out << "berth top  " << ServerAddressFromEnv().text << "  " << clock << "\n"
      << "GPUs: " << held << " held, " << total - held - bad << " free, " << bad << " bad, of "
      << total << "   (# held  . free  x bad)\n\n";
  for (const Json& n : nodes)
    out << std::left << std::setw(static_cast<int>(name_width) + 2) << n["name"].get<std::string>()
        << n["gpuMap"].get<std::string>() << (n["cordoned"].get<bool>() ? "  cordoned" : "")
        << (n["simulated"].get<bool>() ? "  simulated GPUs" : "") << "\n";
  out << "\n"
      << std::left << std::setw(static_cast<int>(name_width) + 2) << "QUEUE"
      << "USAGE (| fair share) of the cluster   USED / FAIR / GUARANTEED   PENDING\n";
  for (const Json& q : queues) {
    const double usage = q["usageGpus"], fair = q["fairShareGpus"], guarantee = q["guaranteeGpus"];
    out << std::left << std::setw(static_cast<int>(name_width) + 2) << q["name"].get<std::string>()
        << "[" << Bar(usage, fair, static_cast<double>(total), 30) << "]  " << Fixed(usage) << " / "
        << Fixed(fair) << " / " << Fixed(guarantee) << "   " << q["pending"].dump() << "\n";
  }
  return out.str();
}

// The frame cut to a terminal of `rows` x `cols`: a taller frame would scroll its head away at
// each redraw, and a wider line would wrap. The last row then says what was left out.
std::string FitToTerminal(const std::string& frame, int rows, int cols) {
  std::vector<std::string> lines;
  std::istringstream in(frame);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  // Every line ends in a newline, so the last row stays empty: a newline there would scroll.
  const size_t keep_rows = static_cast<size_t>(std::max(rows - 1, 1));
  const size_t left_out = lines.size() > keep_rows ? lines.size() - (keep_rows - 1) : 0;
  if (left_out > 0) {
    lines.resize(keep_rows - 1);
    lines.push_back("... " + std::to_string(left_out) +
                    " more lines: a taller terminal, or berth top --once | less");
  }
  std::string out;
  for (std::string& line : lines) {
    if (cols > 0 && line.size() > static_cast<size_t>(cols)) line.resize(cols);
    out += line + "\n";
  }
  return out;
}

}  // namespace

void AddTopCommand(CLI::App& app) {
  auto* top = app.add_subcommand("top", "A live view: GPUs by node, queues against fair share");
  auto a = std::make_shared<TopArgs>();
  top->add_flag("--once", a->once, "Draw one frame and return");
  top->add_option("--interval", a->interval_s, "Seconds between frames")
      ->check(NumberIn(0.2, 3600.0))
      ->capture_default_str();
  AddFormatOption(*top, &a->format);
  top->callback([a] {
    if (a->format == "json") {
      const Json view = {{"nodes", CallServer("GET", "/v1/nodes")["nodes"]},
                         {"queues", CallServer("GET", "/v1/queues")["queues"]}};
      std::cout << JsonText(view) << "\n";
      return;
    }
    for (;;) {
      const std::string frame = Frame();  // fetched before the screen is cleared: no flicker
      if (a->once) {
        std::cout << frame << std::flush;
        return;
      }
      // Into a pipe or a file, frames follow one another whole; only a terminal is redrawn.
      winsize size{};
      if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_row > 0)
        std::cout << "\033[H\033[2J" << FitToTerminal(frame, size.ws_row, size.ws_col);
      else
        std::cout << (isatty(STDOUT_FILENO) ? "\033[H\033[2J" : "\n") << frame;
      std::cout << std::flush;
      std::this_thread::sleep_for(std::chrono::duration<double>(a->interval_s));
    }
  });
}

}  // namespace berth
