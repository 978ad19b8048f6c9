#include "core/cell_tree.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace berth {
namespace {

// A cell before ids are assigned: the tree is built bottom-up so that each cell's type (which
// depends on its children's types) is known before the cell is emitted.
struct Proto {
  int type = -1;
  int node = -1;
  int gpu = -1;
  std::string address;
  std::vector<Proto> kids;
};

std::string CompositionText(const std::vector<std::pair<int, int>>& children,
                            const std::vector<CellType>& types) {
  std::string text;
  for (const auto& [type, count] : children)
    text += (text.empty() ? "" : "+") + std::to_string(count) + "x" + types[type].name;
  return text;
}

}  // namespace

const char* LevelName(Level level) {
  switch (level) {
    case Level::kGpu:
      return "gpu";
    case Level::kSwitch:
      return "switch";
    case Level::kSocket:
      return "socket";
    case Level::kNode:
      return "node";
    case Level::kRack:
      return "rack";
    case Level::kCluster:
      return "cluster";
  }
  return "?";
}

bool ParseLevel(const std::string& text, Level* level) {
  static const std::map<std::string, Level> kNames = {
      {"gpu", Level::kGpu},    {"switch", Level::kSwitch}, {"socket", Level::kSocket},
      {"node", Level::kNode},  {"rack", Level::kRack},     {"cluster", Level::kCluster},
      {"any", Level::kCluster}};
  auto it = kNames.find(text);
  if (it == kNames.end()) return false;
  *level = it->second;
  return true;
}

int CellTree::FindType(const std::string& name) const {
  for (size_t i = 0; i < types_.size(); ++i)
    if (types_[i].name == name) return static_cast<int>(i);
  const size_t dot = name.rfind('.');
  if (dot != std::string::npos) return FindType(name.substr(dot + 1));
  return -1;
}

// Two cells share a type when they have the same name and the same children; a name reused
// for a different shape gets a "#N" suffix so that interchangeable cells stay one type.
int CellTree::InternType(CellType type) {
  std::sort(type.children.begin(), type.children.end());
  const std::string base = type.name;
  for (int n = 2;; ++n) {
    auto same_name = std::find_if(types_.begin(), types_.end(),
                                  [&](const CellType& t) { return t.name == type.name; });
    if (same_name == types_.end()) break;
    if (same_name->children == type.children && same_name->level == type.level &&
        same_name->mig == type.mig && same_name->model == type.model)
      return static_cast<int>(same_name - types_.begin());
    type.name = base + "#" + std::to_string(n);
  }
  types_.push_back(std::move(type));
  return static_cast<int>(types_.size()) - 1;
}

namespace {

// Fills in size, model and MIG flag of an inner type from its children's types.
CellType InnerType(std::string name, Level level, Level tight, const std::vector<Proto>& kids,
                   const std::vector<CellType>& types) {
  CellType t;
  t.name = std::move(name);
  t.level = level;
  t.tight_level = tight;
  std::map<int, int> counts;
  for (const Proto& k : kids) ++counts[k.type];
  t.children.assign(counts.begin(), counts.end());
  bool first = true;
  t.mig = true;
  for (const Proto& k : kids) {
    const CellType& kt = types[k.type];
    t.leaf_count += kt.leaf_count;
    t.mig = t.mig && kt.mig;
    if (first)
      t.model = kt.model;
    else if (t.model != kt.model)
      t.model = "";
    first = false;
  }
  return t;
}

}  // namespace

std::string CellTree::Build(const Cluster& cluster, CellTree* out) {
  CellTree tree;
  tree.gpu_cells_.resize(cluster.nodes.size());
  tree.node_cells_.assign(cluster.nodes.size(), -1);
  for (size_t n = 0; n < cluster.nodes.size(); ++n)
    tree.gpu_cells_[n].assign(cluster.nodes[n].gpus.size(), -1);

  auto leaf = [&](int node, int gpu) {
    const Gpu& g = cluster.nodes[node].gpus[gpu];
    CellType t;
    t.name = g.model;
    if (g.mig_enabled) {
      // GPUs with a fixed MIG geometry are only interchangeable with the same geometry.
      t.name += "/mig";
      std::string layout;
      for (const std::string& item : g.mig_layout) layout += (layout.empty() ? "" : ",") + item;
      if (!layout.empty()) t.name += "[" + layout + "]";
    }
    t.level = t.tight_level = Level::kGpu;
    t.leaf_count = 1;
    t.model = g.model;
    t.mig = g.mig_enabled;
    Proto p;
    p.type = tree.InternType(t);
    p.node = node;
    p.gpu = gpu;
    p.address = cluster.nodes[node].name + "/gpu" + std::to_string(gpu);
    return p;
  };

  Proto root;
  if (!cluster.explicit_cells) {
    // Derived view: node > socket > switch > GPU, collapsing single-child levels.
    auto build_node = [&](int n) {
      const Node& node = cluster.nodes[n];
      const std::string shape =
          node.shape.empty()
              ? (node.gpus.empty() ? "cpu"
                                   : node.gpus[0].model + "x" + std::to_string(node.gpus.size()))
              : node.shape;
      std::map<int, std::map<int, std::vector<int>>> gpus_by_socket;  // socket > switch > GPUs
      for (size_t g = 0; g < node.gpus.size(); ++g) {
        const int w = node.gpus[g].pcie_switch;
        gpus_by_socket[node.switches[w].socket][w].push_back(static_cast<int>(g));
      }
      size_t switch_count = 0;
      for (const auto& [s, switches] : gpus_by_socket) switch_count += switches.size();
      std::vector<Proto> sockets;
      for (const auto& [s, switches] : gpus_by_socket) {
        std::vector<Proto> socket_kids;
        for (const auto& [w, gpu_ids] : switches) {
          std::vector<Proto> gpus;
          for (int g : gpu_ids) gpus.push_back(leaf(n, g));
          if (gpus.size() < 2 || switch_count < 2) {
            for (Proto& g : gpus) socket_kids.push_back(std::move(g));
            continue;
          }
          Proto sw;
          sw.type = tree.InternType(
              InnerType(shape + "/switch", Level::kSwitch, Level::kSwitch, gpus, tree.types_));
          sw.node = n;
          sw.address = node.name + "/switch" + std::to_string(w);
          sw.kids = std::move(gpus);
          socket_kids.push_back(std::move(sw));
        }
        if (gpus_by_socket.size() < 2 || socket_kids.size() < 2) {
          for (Proto& k : socket_kids) sockets.push_back(std::move(k));
          continue;
        }
        Proto so;
        so.type = tree.InternType(
            InnerType(shape + "/socket", Level::kSocket, Level::kSocket, socket_kids, tree.types_));
        so.node = n;
        so.address = node.name + "/socket" + std::to_string(s);
        so.kids = std::move(socket_kids);
        sockets.push_back(std::move(so));
      }
      const Level tight = switch_count <= 1            ? Level::kSwitch
                          : gpus_by_socket.size() <= 1 ? Level::kSocket
                                                       : Level::kNode;
      Proto p;
      p.type =
          tree.InternType(InnerType(shape + "/node", Level::kNode, tight, sockets, tree.types_));
      p.node = n;
      p.address = node.name;
      p.kids = std::move(sockets);
      return p;
    };

    std::map<std::string, std::vector<Proto>> by_rack;
    for (size_t n = 0; n < cluster.nodes.size(); ++n) {
      if (cluster.nodes[n].gpus.empty()) continue;
      Proto p = build_node(static_cast<int>(n));
      if (cluster.nodes[n].rack.empty())
        root.kids.push_back(std::move(p));
      else
        by_rack[cluster.nodes[n].rack].push_back(std::move(p));
    }
    // Racks are named "rack" when they all hold the same node types, else by composition.
    std::set<std::vector<std::pair<int, int>>> compositions;
    for (const auto& [name, kids] : by_rack)
      compositions.insert(InnerType("", Level::kRack, Level::kRack, kids, tree.types_).children);
    for (const std::string& rack : cluster.racks) {
      auto it = by_rack.find(rack);
      if (it == by_rack.end()) continue;
      CellType t = InnerType("rack", Level::kRack, Level::kRack, it->second, tree.types_);
      if (compositions.size() > 1)
        t.name = "rack(" + CompositionText(t.children, tree.types_) + ")";
      Proto r;
      r.type = tree.InternType(t);
      r.address = rack;
      r.kids = std::move(it->second);
      root.kids.push_back(std::move(r));
    }
  } else {
    // Explicit view: HiveD cell types; node-level cells name nodes.
    const ExplicitCells& ex = *cluster.explicit_cells;
    std::map<std::string, const CellTypeSpec*> specs;
    for (const CellTypeSpec& s : ex.cell_types) specs[s.name] = &s;
    std::map<std::string, int> height_memo;
    std::function<int(const std::string&)> height = [&](const std::string& name) -> int {
      auto it = specs.find(name);
      if (it == specs.end()) return 0;
      auto memo = height_memo.find(name);
      if (memo != height_memo.end()) return memo->second;
      return height_memo[name] = 1 + height(it->second->child_type);
    };
    std::string error;
    // below_node: the node-level cell this one is inside (-1 above node level).
    std::function<Proto(const PhysicalCellSpec&, const std::string&, int, int*)> build =
        [&](const PhysicalCellSpec& spec, const std::string& type_name, int node,
            int* next_gpu) -> Proto {
      auto it = specs.find(type_name);
      if (it == specs.end()) {  // a leaf: one GPU of the node
        if (node < 0 || *next_gpu >= static_cast<int>(cluster.nodes[node].gpus.size())) {
          error = "cell " + spec.address + ": more leaf cells than node GPUs";
          return Proto{};
        }
        return leaf(node, (*next_gpu)++);
      }
      const CellTypeSpec& t = *it->second;
      int gpu_counter = 0;
      if (t.is_node_level) {
        node = cluster.FindNode(spec.address);
        if (node < 0) {
          error = "cell type " + t.name + ": node \"" + spec.address + "\" is not declared";
          return Proto{};
        }
        next_gpu = &gpu_counter;
      }
      Proto p;
      for (int i = 0; i < t.child_count && error.empty(); ++i) {
        PhysicalCellSpec child;
        if (i < static_cast<int>(spec.children.size())) child = spec.children[i];
        if (child.address.empty()) child.address = spec.address + "/" + std::to_string(i);
        p.kids.push_back(build(child, t.child_type, node, next_gpu));
      }
      if (!error.empty()) return Proto{};
      if (t.is_node_level && gpu_counter != static_cast<int>(cluster.nodes[node].gpus.size())) {
        error = "node \"" + spec.address + "\" has " +
                std::to_string(cluster.nodes[node].gpus.size()) + " GPUs but cell type " + t.name +
                " holds " + std::to_string(gpu_counter);
        return Proto{};
      }
      const int h = height(t.name);
      const bool above_node = node < 0;
      const Level level = t.is_node_level ? Level::kNode
                          : above_node    ? Level::kRack
                          : h == 1        ? Level::kSwitch
                                          : Level::kSocket;
      p.type = tree.InternType(InnerType(t.name, level, level, p.kids, tree.types_));
      p.node = t.is_node_level || !above_node ? node : -1;
      p.address = spec.address;
      return p;
    };
    for (const PhysicalCellSpec& pc : ex.physical_cells) {
      int unused = 0;
      root.kids.push_back(build(pc, pc.cell_type, -1, &unused));
      if (!error.empty()) return error;
    }
  }

  // A cluster of no GPUs is the root alone: nodes join a server started without a cluster, and
  // the first may have only CPUs (a cluster file refuses a cluster without GPUs itself).
  root.type = tree.InternType(
      InnerType("cluster", Level::kCluster, Level::kCluster, root.kids, tree.types_));
  root.address = cluster.name.empty() ? "cluster" : cluster.name;

  // Emit cells in preorder.
  std::function<int(Proto&, int)> emit = [&](Proto& p, int parent) {
    const int id = tree.AddCell(p.type, parent, p.node, p.gpu, std::move(p.address));
    if (tree.types_[p.type].level == Level::kNode) tree.node_cells_[p.node] = id;
    if (p.gpu >= 0) {
      tree.gpu_cells_[p.node][p.gpu] = id;
      tree.leaves_.push_back(id);
    }
    for (Proto& k : p.kids) {
      const int child = emit(k, id);
      tree.cells_[id].children.push_back(child);
    }
    return id;
  };
  tree.root_ = emit(root, -1);
  tree.Finish();
  *out = std::move(tree);
  return "";
}

int CellTree::AddCell(int type, int parent, int node, int gpu, std::string address) {
  Cell c;
  c.type = type;
  c.parent = parent;
  c.node = node;
  c.gpu = gpu;
  c.address = std::move(address);
  cells_.push_back(std::move(c));
  return static_cast<int>(cells_.size()) - 1;
}

void CellTree::Finish() {
  const int n = static_cast<int>(cells_.size());
  // Cells are emitted in preorder, so a subtree is the id range [id, id + size).
  order_.resize(n);
  order_end_.resize(n);
  for (int i = n - 1; i >= 0; --i) {
    order_[i] = i;
    order_end_[i] = cells_[i].children.empty() ? i + 1 : order_end_[cells_[i].children.back()];
  }
  const int t = static_cast<int>(types_.size());
  contains_.assign(t, std::vector<bool>(t, false));
  // Children types are interned before parents, so one pass in id order closes the relation.
  for (int a = 0; a < t; ++a) {
    contains_[a][a] = true;
    for (const auto& [child, count] : types_[a].children)
      for (int b = 0; b < t; ++b)
        if (contains_[child][b]) contains_[a][b] = true;
  }
}

}  // namespace berth
