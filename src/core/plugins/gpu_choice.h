// How the paper's simulator picks the GPUs inside the chosen node, expressed over berth's
// candidates so that a score plugin can reproduce it.
//
// The reference (hkust-adsl/kubernetes-scheduler-simulator) scores nodes, takes the best node,
// and only then picks GPUs on it (the Open-Gpu-Share plugin's Reserve): whole-GPU pods take
// the first free GPUs by index; a share takes the GPU its gpuSelMethod names. Among nodes with
// the best score its kube-scheduler fork (vendor/.../core/generic_scheduler.go, selectHost)
// takes the one with the lexicographically smallest name, not a random one ("for
// reproducibility"). Its names are not the node list's, though: the simulator prefixes each
// with a seeded random rank, so ties go to the first node of a random order fixed for the run
// (berth sim packing gives its cluster such an order; the pipeline takes the first candidate).
//
// berth instead scores candidates: for a share, one per GPU already shared that still fits
// (GPUs in the same state offered once, the lowest index), plus one fresh GPU
// (Allocator::AddCandidatesOnNode). A plugin reproduces the reference by giving the candidate
// the reference would take on a node the node's score, and every other candidate of that node
// a score lowered by kOtherGpuPenalty (or its own, lower, score): the best candidates are then
// exactly one per best node, and the pipeline's tie break chooses among nodes (by name, to
// match the published runs).
#pragma once

#include "core/allocator.h"
#include "core/cluster.h"
#include "core/plugins/plugin.h"

namespace berth {

// Small enough never to reorder the integer scores of the reference's policies.
constexpr double kOtherGpuPenalty = 1e-3;

// True when GPU `gpu` of `node` could take a share of `demand`: usable, not MIG-enabled, of an
// allowed model, with at least demand.gpu_milli free. (The allocator also checks GPU memory and
// the CPU and memory of the GPU's socket; those are not repeated here.)
bool ShareFitsGpu(const Allocator& alloc, const Demand& demand, int node, int gpu);

// The reference's normalizers for node resources (gpushareutils.MaxSpecCpu / MaxSpecGpu).
constexpr double kMaxSpecCpuMilli = 128000;
constexpr double kMaxSpecGpuMilli = 8000;

// Free GPU milli of a node's usable, non-MIG GPUs (what dotprod and bestfit weigh).
int64_t NodeFreeGpuMilli(const Allocator& alloc, int node);

// Whether `c` is the GPU the reference's "best" selection (allocateGpuIdBasedOnBestFit) takes
// on c.node: for a share, the fitting GPU with the least free milli, the lowest index among
// equals, a fresh GPU only when no shared GPU fits. True for every other demand.
bool IsBestFitChoice(const Allocator& alloc, const Demand& demand, const Candidate& c);

// The score a node-level policy gives candidate `c`: `node_score` when the reference would
// take c's GPU on that node (best fit), else node_score - kOtherGpuPenalty.
double BestFitCandidateScore(const Allocator& alloc, const Demand& demand, const Candidate& c,
                             double node_score);

// The candidate's share of the GPUs a share could go to on its node, for sampling GPUs
// uniformly (the reference's "random" selection): `gpus_here` is how many GPUs c stands for
// (the fitting fresh GPUs for a fresh candidate, else 1), `gpus_on_node` how many fit on the
// node in all. Both 1 for demands other than shares.
void ShareWeight(const Allocator& alloc, const Demand& demand, const Candidate& c, int* gpus_here,
                 int* gpus_on_node);

}  // namespace berth
