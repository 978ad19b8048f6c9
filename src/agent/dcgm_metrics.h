// Parses a DCGM exporter's /metrics page (Prometheus text exposition 0.0.4) into one record per
// GPU and per MIG instance, for the node agent's telemetry.
//
// The exporter labels each sample gpu="N", UUID="GPU-...", device="nvidiaN", modelName,
// Hostname, and for a MIG instance GPU_I_ID and GPU_I_PROFILE (UUID is then the parent GPU's).
// Known metrics fill a record's fields; other metrics, other exporters' samples and samples
// without a gpu label are skipped. HELP/TYPE/comment lines, label escapes (\\ \" \n), a trailing
// comma in the label set, NaN/+Inf values (which leave a field unknown) and timestamps are
// accepted.
//
// A sample line that breaks the exposition syntax throws ConfigError "SOURCE:LINE: ...": a
// page that garbled is not to be half-trusted. Bounds: kMaxDcgmBytes of text, kMaxDcgmLines
// lines of at most kMaxDcgmLineBytes, kMaxDcgmSeries records (GPUs and MIG instances).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/telemetry.h"
#include "protocol/agent_protocol.h"

namespace berth {

constexpr size_t kMaxDcgmBytes = 16 << 20;
constexpr size_t kMaxDcgmLines = 200'000;
constexpr size_t kMaxDcgmLineBytes = 64 << 10;
constexpr size_t kMaxDcgmSeries = 64 * 8;  // kMaxGpus GPUs, 7 MIG instances each and the GPU

// One GPU (mig_instance -1) or one MIG instance. Values not on the page are negative.
struct DcgmGpuMetrics {
  int gpu = -1;
  int mig_instance = -1;    // GPU_I_ID
  std::string mig_profile;  // GPU_I_PROFILE
  std::string uuid;         // the GPU's (a MIG instance's parent)
  std::string device;       // "nvidia0"
  std::string model_name;   // "NVIDIA A100-SXM4-80GB"
  std::string hostname;
  double fb_used_mib = -1;             // DCGM_FI_DEV_FB_USED
  double fb_free_mib = -1;             // DCGM_FI_DEV_FB_FREE
  double gpu_util_percent = -1;        // DCGM_FI_DEV_GPU_UTIL, 0-100
  double sm_active = -1;               // DCGM_FI_PROF_SM_ACTIVE, a ratio 0-1
  double nvlink_bandwidth_total = -1;  // DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL
  double pcie_tx_bytes = -1;           // DCGM_FI_PROF_PCIE_TX_BYTES (a rate, per second)
  double pcie_rx_bytes = -1;           // DCGM_FI_PROF_PCIE_RX_BYTES
  double power_watts = -1;             // DCGM_FI_DEV_POWER_USAGE
  double temperature_c = -1;           // DCGM_FI_DEV_GPU_TEMP
  double xid_errors = -1;              // DCGM_FI_DEV_XID_ERRORS: the last XID, 0 for none
};

struct DcgmScrape {
  std::vector<DcgmGpuMetrics> gpus;  // ascending (gpu, mig_instance)
  size_t skipped_samples = 0;        // of metrics berth does not read

  // The record of GPU `gpu` (or of its MIG instance `mig_instance`), or null.
  const DcgmGpuMetrics* Find(int gpu, int mig_instance = -1) const;
  // The whole GPU's record with this UUID, or null.
  const DcgmGpuMetrics* FindByUuid(std::string_view uuid) const;
};

DcgmScrape ParseDcgmMetrics(std::string_view text, const std::string& source);

// The engine's view of one record (core/telemetry.h).
GpuTelemetry ToTelemetry(const DcgmGpuMetrics& metrics);

// The record as the agent's report carries it, for the node's GPU `gpu`. A value outside what
// the field can be (negative, a utilization past 100%, an SM activity past 1, past the report's
// bounds) is a misreading and stays unknown (-1): the server refuses a report that carries one.
GpuReport ToGpuReport(int gpu, const DcgmGpuMetrics& metrics);

}  // namespace berth
