// berth's device plugin through kubelet's eyes: the test serves a fake kubelet Registration
// service on kubelet.sock in a temporary plugin directory, runs the plugin against the
// API-server stand-in, and dials the plugin's socket with a real gRPC client, as kubelet does.
#include "k8s/deviceplugin/device_plugin.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "k8s/apiserver_standin.h"
#include "k8s/deviceplugin/api.grpc.pb.h"
#include "k8s/gpu_ids_signature.h"
#include "k8s/k8s_test_util.h"
#include "k8s/kube_client.h"

namespace berth {
namespace {

using k8s_test::GpuNode;
using k8s_test::GpuPod;
using nlohmann::json;

constexpr const char* kNode = "gpu-node-1";
const std::vector<std::string> kUuids = {"GPU-a0", "GPU-a1", "GPU-a2", "GPU-a3"};

// kubelet's side of registration: remembers every RegisterRequest.
class FakeKubelet final : public v1beta1::Registration::Service {
 public:
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* request,
                        v1beta1::Empty*) override {
    std::lock_guard<std::mutex> lock(mu);
    requests.push_back(*request);
    return grpc::Status::OK;
  }
  std::mutex mu;
  std::vector<v1beta1::RegisterRequest> requests;
};

class DevicePluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir_template[] = "/tmp/berth-dp-XXXXXX";  // short: unix socket paths are bounded
    ASSERT_NE(mkdtemp(dir_template), nullptr);
    dir_ = dir_template;
    std::filesystem::create_directory(dir_ + "/dev");
    std::ofstream(dir_ + "/dev/nvidia2").put('\n');  // only GPU 2 has a device file

    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + dir_ + "/" + kKubeletSocket,
                             grpc::InsecureServerCredentials());
    builder.RegisterService(&kubelet_);
    kubelet_server_ = builder.BuildAndStart();
    ASSERT_NE(kubelet_server_, nullptr);

    KubeConfig config;
    config.server = api_.Start();
    api_.Create("nodes", GpuNode(kNode, 4));
    kube_ = std::make_unique<KubeClient>(config);

    DevicePluginOptions options;
    options.node = kNode;
    options.plugin_dir = dir_;
    options.gpu_uuids = kUuids;
    options.dev_dir = dir_ + "/dev";
    options.health_interval_s = 0.05;
    options.share_seats = 2;
    options.list_gpus = [this] {
      std::lock_guard<std::mutex> lock(present_mu_);
      return present_;
    };
    plugin_ = std::make_unique<DevicePlugin>(options, *kube_);
    ASSERT_EQ(plugin_->Start(), "");
    stub_ = v1beta1::DevicePlugin::NewStub(grpc::CreateChannel(
        "unix://" + dir_ + "/" + kDevicePluginSocket, grpc::InsecureChannelCredentials()));
    share_stub_ = v1beta1::DevicePlugin::NewStub(grpc::CreateChannel(
        "unix://" + dir_ + "/" + kSharePluginSocket, grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (plugin_) plugin_->Stop();
    if (kubelet_server_) kubelet_server_->Shutdown();
    api_.Stop();
    std::filesystem::remove_all(dir_);
  }

  // A pod berth bound to this node with these annotations (gpu-ids, placement).
  void BindPod(const std::string& name, int gpus, const std::map<std::string, std::string>& bound,
               const std::map<std::string, std::string>& own = {}) {
    api_.Create("pods", GpuPod(name, gpus, own));
    api_.Bind("ml", name, kNode, bound);
  }

  // A share pod berth bound here: one seat of berth.io/gpu-share (asked by its container, or
  // by `pod` as given), `milli` of GPU `gpu_id`.
  void BindSharePod(const std::string& name, const std::string& gpu_id, int milli,
                    json pod = nullptr) {
    if (pod.is_null()) {
      pod = GpuPod(name, 0, {{"berth.io/gpu-share", std::to_string(milli)}});
      pod["spec"]["containers"][0]["resources"]["limits"]["berth.io/gpu-share"] = "1";
    }
    api_.Create("pods", pod);
    api_.Bind("ml", name, kNode,
              {{"berth.io/gpu-ids", gpu_id},
               {"berth.io/placement", "{\"gpuMilli\":" + std::to_string(milli) + "}"}});
  }

  // Allocate as kubelet sends it: one container asking for `ids` (of the share resource's
  // plugin with `share`).
  grpc::Status Allocate(const std::vector<std::string>& ids,
                        v1beta1::ContainerAllocateResponse* answer, bool share = false) {
    v1beta1::AllocateRequest request;
    auto* container = request.add_container_requests();
    for (const std::string& id : ids) container->add_devices_ids(id);
    v1beta1::AllocateResponse response;
    grpc::ClientContext context;
    const grpc::Status status =
        (share ? share_stub_ : stub_)->Allocate(&context, request, &response);
    if (status.ok() && response.container_responses_size() == 1)
      *answer = response.container_responses(0);
    return status;
  }

  static std::string Env(const v1beta1::ContainerAllocateResponse& answer,
                         const std::string& name) {
    const auto env = answer.envs().find(name);
    return env != answer.envs().end() ? env->second : "<unset>";
  }

  // GetPreferredAllocation as kubelet asks it for one container: `size` of `available`,
  // `must` among them; the ids answered, each followed by a space.
  std::string Preferred(const std::vector<std::string>& available, int size,
                        const std::vector<std::string>& must = {}, bool share = false) {
    v1beta1::PreferredAllocationRequest request;
    auto* container = request.add_container_requests();
    for (const std::string& id : available) container->add_available_deviceids(id);
    for (const std::string& id : must) container->add_must_include_deviceids(id);
    container->set_allocation_size(size);
    v1beta1::PreferredAllocationResponse response;
    grpc::ClientContext context;
    const grpc::Status status =
        (share ? share_stub_ : stub_)->GetPreferredAllocation(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    std::string ids;
    if (response.container_responses_size() == 1)
      for (const std::string& id : response.container_responses(0).deviceids()) ids += id + " ";
    return ids;
  }

  std::string VisibleDevices(const std::vector<std::string>& ids, bool share = false) {
    v1beta1::ContainerAllocateResponse answer;
    const grpc::Status status = Allocate(ids, &answer, share);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return Env(answer, "NVIDIA_VISIBLE_DEVICES");
  }

  std::string dir_;
  FakeKubelet kubelet_;
  std::unique_ptr<grpc::Server> kubelet_server_;
  testing::ApiServerStandIn api_;
  std::unique_ptr<KubeClient> kube_;
  std::mutex present_mu_;
  std::vector<std::string> present_ = kUuids;
  std::unique_ptr<DevicePlugin> plugin_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub_, share_stub_;
};

TEST_F(DevicePluginTest, RegistersWithKubeletAndPublishesTheUuids) {
  {
    std::lock_guard<std::mutex> lock(kubelet_.mu);
    ASSERT_EQ(kubelet_.requests.size(), 2u);
    const v1beta1::RegisterRequest& request = kubelet_.requests[0];
    EXPECT_EQ(request.version(), "v1beta1");
    EXPECT_EQ(request.endpoint(), "berth.sock");
    EXPECT_EQ(request.resource_name(), "nvidia.com/gpu");
    EXPECT_FALSE(request.options().pre_start_required());
    EXPECT_TRUE(request.options().get_preferred_allocation_available());
    EXPECT_EQ(kubelet_.requests[1].endpoint(), "berth-share.sock");
    EXPECT_EQ(kubelet_.requests[1].resource_name(), "berth.io/gpu-share");
  }
  const json node = api_.Get("nodes", "", kNode).value();
  EXPECT_EQ(node["metadata"]["annotations"]["berth.io/gpu-uuids"], "GPU-a0,GPU-a1,GPU-a2,GPU-a3");
  EXPECT_EQ(node["metadata"]["labels"]["nvidia.com/gpu.count"], "4");  // a merge, not a replace

  v1beta1::DevicePluginOptions options;
  grpc::ClientContext context;
  ASSERT_TRUE(stub_->GetDevicePluginOptions(&context, v1beta1::Empty(), &options).ok());
  EXPECT_FALSE(options.pre_start_required());
  EXPECT_TRUE(options.get_preferred_allocation_available());
}

TEST_F(DevicePluginTest, ListAndWatchSendsTheGpusAndAgainWhenOneTurnsUnhealthy) {
  grpc::ClientContext context;
  auto stream = stub_->ListAndWatch(&context, v1beta1::Empty());
  v1beta1::ListAndWatchResponse list;
  ASSERT_TRUE(stream->Read(&list));
  ASSERT_EQ(list.devices_size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(list.devices(i).id(), kUuids[i]);
    EXPECT_EQ(list.devices(i).health(), "Healthy");
  }
  {
    std::lock_guard<std::mutex> lock(present_mu_);
    present_ = {"GPU-a0", "GPU-a2", "GPU-a3"};  // GPU-a1 fell off the bus
  }
  ASSERT_TRUE(stream->Read(&list));
  ASSERT_EQ(list.devices_size(), 4);
  EXPECT_EQ(list.devices(1).id(), "GPU-a1");
  EXPECT_EQ(list.devices(1).health(), "Unhealthy");
  EXPECT_EQ(list.devices(0).health(), "Healthy");
  context.TryCancel();
}

TEST_F(DevicePluginTest, AllocateGivesThePodBerthsGpusNotKubeletsOnce) {
  BindPod("train", 2, {{"berth.io/gpu-ids", "GPU-a2,GPU-a3"}});
  v1beta1::ContainerAllocateResponse answer;
  ASSERT_TRUE(Allocate({"GPU-a0", "GPU-a1"}, &answer).ok());
  EXPECT_EQ(Env(answer, "NVIDIA_VISIBLE_DEVICES"), "GPU-a2,GPU-a3");
  EXPECT_EQ(answer.envs().count("BERTH_GPU_MEMORY_LIMIT_MIB"), 0u);  // whole GPUs
  ASSERT_EQ(answer.devices_size(), 1);  // /dev/nvidia3 does not exist here
  EXPECT_EQ(answer.devices(0).container_path(), "/dev/nvidia2");
  EXPECT_EQ(answer.devices(0).host_path(), dir_ + "/dev/nvidia2");
  EXPECT_EQ(answer.annotations_size(), 0);
  // The pod is served: another pod's container of the same size is not given its GPUs again,
  // even when kubelet offers exactly those (it believes them free).
  EXPECT_EQ(VisibleDevices({"GPU-a2", "GPU-a3"}), "GPU-a2,GPU-a3");
  // The same devices again are another container of the served pod: the same answer.
  EXPECT_EQ(VisibleDevices({"GPU-a1", "GPU-a0"}), "GPU-a2,GPU-a3");
}

TEST_F(DevicePluginTest, AllocateMatchesThePodByTheGpusKubeletOffered) {
  BindPod("first", 1, {{"berth.io/gpu-ids", "GPU-a3"}});
  BindPod("running", 1, {{"berth.io/gpu-ids", "GPU-a0"}});
  api_.Patch("pods", "ml", "running", {{"status", {{"phase", "Running"}}}});  // already started
  BindPod("second", 1, {{"berth.io/gpu-ids", "1"}});  // indexes, from before the UUIDs
  // Two pods of one size wait (as after a plugin restart forgot which it served, or when two
  // are bound at once): neither's GPUs offered, which is which cannot be told.
  EXPECT_EQ(VisibleDevices({"GPU-a2"}), "GPU-a2");
  // kubelet offers a pod's own GPUs (GetPreferredAllocation steers it): that pod gets them,
  // whatever its age.
  EXPECT_EQ(VisibleDevices({"GPU-a1"}), "GPU-a1");
  // One pod of that size left: it is the one, though kubelet offered another GPU.
  EXPECT_EQ(VisibleDevices({"GPU-a2"}), "GPU-a3");
  // None left: kubelet's choice. (kubelet never offers a device a pod still holds, so the
  // same devices again are another container of a pod already served: see below.)
  EXPECT_EQ(VisibleDevices({"GPU-a0"}), "GPU-a0");
}

TEST_F(DevicePluginTest, AllocateFailsWhenThePodsCannotBeListed) {
  BindPod("train", 1, {{"berth.io/gpu-ids", "GPU-a3"}});
  api_.Stop();
  v1beta1::ContainerAllocateResponse answer;
  const grpc::Status status = Allocate({"GPU-a0"}, &answer);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(status.error_message().find("cannot list"), std::string::npos);
}

// A share pod reaches Allocate only when it requests one device of the plugin's resource.
TEST_F(DevicePluginTest, ASharePodGetsItsLimits) {
  BindPod("share", 1,
          {{"berth.io/gpu-ids", "GPU-a1"},
           {"berth.io/placement",
            R"({"gpuMemoryMiB":8192,"gpuMilli":250,"gpus":[1],"node":"gpu-node-1"})"}},
          {{"berth.io/gpu-share", "250"}});
  v1beta1::ContainerAllocateResponse answer;
  ASSERT_TRUE(Allocate({"GPU-a0"}, &answer).ok());
  EXPECT_EQ(Env(answer, "NVIDIA_VISIBLE_DEVICES"), "GPU-a1");
  EXPECT_EQ(Env(answer, "BERTH_GPU_MEMORY_LIMIT_MIB"), "8192");
  EXPECT_EQ(Env(answer, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
}

TEST_F(DevicePluginTest, SharesAreSeatsOnEachGpuThatFollowItsHealth) {
  grpc::ClientContext context;
  auto stream = share_stub_->ListAndWatch(&context, v1beta1::Empty());
  v1beta1::ListAndWatchResponse list;
  ASSERT_TRUE(stream->Read(&list));
  ASSERT_EQ(list.devices_size(), 8);  // 4 GPUs x 2 seats
  EXPECT_EQ(list.devices(0).id(), "GPU-a0::0");
  EXPECT_EQ(list.devices(3).id(), "GPU-a1::1");
  {
    std::lock_guard<std::mutex> lock(present_mu_);
    present_ = {"GPU-a0", "GPU-a2", "GPU-a3"};
  }
  ASSERT_TRUE(stream->Read(&list));
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(list.devices(i).health(), i / 2 == 1 ? "Unhealthy" : "Healthy") << i;
  context.TryCancel();
}

// Two share pods on one GPU take two seats, whichever seats kubelet picked; each gets its own
// limits. Whole-GPU pods and share pods never take each other's Allocate.
TEST_F(DevicePluginTest, ASharePodGetsBerthsGpuForAnySeat) {
  BindSharePod("share-a", "GPU-a2", 250);
  BindSharePod("share-b", "GPU-a2", 500);
  BindPod("whole", 1, {{"berth.io/gpu-ids", "GPU-a3"}});
  v1beta1::ContainerAllocateResponse answer;
  ASSERT_TRUE(Allocate({"GPU-a2::1"}, &answer, true).ok());  // a seat on berth's GPU: exact
  EXPECT_EQ(Env(answer, "NVIDIA_VISIBLE_DEVICES"), "GPU-a2");
  EXPECT_EQ(Env(answer, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
  ASSERT_TRUE(Allocate({"GPU-a0::0"}, &answer, true).ok());  // the only share pod left
  EXPECT_EQ(Env(answer, "NVIDIA_VISIBLE_DEVICES"), "GPU-a2");
  EXPECT_EQ(Env(answer, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "50");
  // No share pod waits: kubelet's seat stands; the whole-GPU pod is not taken for it.
  EXPECT_EQ(VisibleDevices({"GPU-a1::0"}, true), "GPU-a1");
  EXPECT_EQ(VisibleDevices({"GPU-a0"}), "GPU-a3");  // the whole pod, by the whole-GPU plugin

  v1beta1::ContainerAllocateResponse refused;
  EXPECT_EQ(Allocate({"GPU-a0"}, &refused, true).error_code(),  // a GPU, not a seat
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Allocate({"GPU-a0::2"}, &refused, true).error_code(),  // past the seats
            grpc::StatusCode::INVALID_ARGUMENT);
}

// kubelet allocates for each container; a main container reuses its init container's seat and
// must get the same pod's answer, not the next share pod's.
TEST_F(DevicePluginTest, InitAndMainContainersOfOnePodGetTheSameAnswer) {
  json pod = GpuPod("with-init", 0, {{"berth.io/gpu-share", "250"}});
  pod["spec"]["containers"][0]["resources"]["limits"]["berth.io/gpu-share"] = "1";
  pod["spec"]["initContainers"] = {
      {{"name", "init"}, {"resources", {{"limits", {{"berth.io/gpu-share", "1"}}}}}}};
  BindSharePod("with-init", "GPU-a2", 250, pod);
  BindSharePod("other", "GPU-a1", 500);
  v1beta1::ContainerAllocateResponse init, main, other;
  ASSERT_TRUE(Allocate({"GPU-a2::0"}, &init, true).ok());
  ASSERT_TRUE(Allocate({"GPU-a2::0"}, &main, true).ok());
  ASSERT_TRUE(Allocate({"GPU-a2::1"}, &other, true).ok());
  EXPECT_EQ(Env(init, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
  EXPECT_EQ(Env(main, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
  EXPECT_EQ(Env(other, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "50");
}

// Each registration matches only the pods that ask for its resource: a seat asked by an init
// container alone is a share; a share by annotation alone asks for no device and is nobody's.
TEST_F(DevicePluginTest, EachResourceMatchesOnlyThePodsThatAskForIt) {
  json pod = GpuPod("init-seat", 0, {{"berth.io/gpu-share", "300"}});
  pod["spec"]["initContainers"] = {
      {{"name", "init"}, {"resources", {{"limits", {{"berth.io/gpu-share", "1"}}}}}}};
  BindSharePod("init-seat", "GPU-a1", 300, pod);
  BindSharePod("no-device", "GPU-a0", 300, GpuPod("no-device", 0, {{"berth.io/gpu-share", "300"}}));
  BindPod("whole", 1, {{"berth.io/gpu-ids", "GPU-a3"}});
  v1beta1::ContainerAllocateResponse answer;
  ASSERT_TRUE(Allocate({"GPU-a0::0"}, &answer, true).ok());
  EXPECT_EQ(Env(answer, "NVIDIA_VISIBLE_DEVICES"), "GPU-a1");
  EXPECT_EQ(Env(answer, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "30");
  ASSERT_TRUE(Allocate({"GPU-a0"}, &answer).ok());  // the only whole-GPU pod
  EXPECT_EQ(Env(answer, "NVIDIA_VISIBLE_DEVICES"), "GPU-a3");
  EXPECT_EQ(Env(answer, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "<unset>");
}

// A restarted plugin has forgotten whom it served, but kubelet reports an admitted pod's
// containers (waiting while the image is pulled): that pod is not matched again.
TEST_F(DevicePluginTest, APodKubeletAdmittedIsNotMatchedAgainAfterARestart) {
  BindSharePod("pulling", "GPU-a2", 250);
  v1beta1::ContainerAllocateResponse answer;
  ASSERT_TRUE(Allocate({"GPU-a2::0"}, &answer, true).ok());
  api_.Patch(
      "pods", "ml", "pulling",
      {{"status",
        {{"phase", "Pending"},
         {"containerStatuses",
          {{{"name", "main"}, {"state", {{"waiting", {{"reason", "ContainerCreating"}}}}}}}}}}});
  plugin_->Stop();
  DevicePluginOptions options;
  options.node = kNode;
  options.plugin_dir = dir_;
  options.gpu_uuids = kUuids;
  options.share_seats = 2;
  plugin_ = std::make_unique<DevicePlugin>(options, *kube_);
  ASSERT_EQ(plugin_->Start(), "");
  BindSharePod("next", "GPU-a1", 500);
  ASSERT_TRUE(Allocate({"GPU-a2::1"}, &answer, true).ok());
  EXPECT_EQ(Env(answer, "NVIDIA_VISIBLE_DEVICES"), "GPU-a1");
  EXPECT_EQ(Env(answer, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "50");
}

// With a signing key, berth's GPUs go only to pods whose gpu-ids the extender signed: a pod
// that wrote the annotation (and spec.nodeName) itself gets kubelet's choice.
TEST_F(DevicePluginTest, WithAKeyOnlySignedGpuIdsAreHonoured) {
  const std::string key = "a-key-of-enough-bytes";
  plugin_->Stop();
  DevicePluginOptions options;
  options.node = kNode;
  options.plugin_dir = dir_;
  options.gpu_uuids = kUuids;
  options.signing_key = key;
  plugin_ = std::make_unique<DevicePlugin>(options, *kube_);
  ASSERT_EQ(plugin_->Start(), "");
  BindPod("forged", 1, {{"berth.io/gpu-ids", "GPU-a3"}});
  EXPECT_EQ(VisibleDevices({"GPU-a0"}), "GPU-a0");
  BindPod("wrong-node", 1,
          {{"berth.io/gpu-ids", "GPU-a2"},
           {"berth.io/gpu-ids-signature", SignGpuIds(key, "any-uid", "other", "GPU-a2")}});
  EXPECT_EQ(VisibleDevices({"GPU-a1"}), "GPU-a1");
  // Signed as the extender signs at bind: the UID the API server gave the pod.
  const std::string uid = api_.Create("pods", GpuPod("signed", 1))["metadata"]["uid"];
  api_.Bind("ml", "signed", kNode,
            {{"berth.io/gpu-ids", "GPU-a2"},
             {"berth.io/gpu-ids-signature", SignGpuIds(key, uid, kNode, "GPU-a2")}});
  EXPECT_EQ(VisibleDevices({"GPU-a1"}), "GPU-a2");
}

TEST_F(DevicePluginTest, PreferredSeatIsOnBerthsGpu) {
  BindSharePod("share", "GPU-a3", 100);
  EXPECT_EQ(Preferred({"GPU-a0::0", "GPU-a1::0", "GPU-a3::0", "GPU-a3::1"}, 1, {}, true),
            "GPU-a3::0 ");
}

TEST_F(DevicePluginTest, WithoutABerthPodKubeletsIdsAreUsed) {
  EXPECT_EQ(VisibleDevices({"GPU-a0", "GPU-a3"}), "GPU-a0,GPU-a3");
}

TEST_F(DevicePluginTest, MalformedAnnotationsAreSkipped) {
  BindPod("unknown-gpu", 2, {{"berth.io/gpu-ids", "GPU-zz,GPU-a1"}});
  BindPod("twice", 2, {{"berth.io/gpu-ids", "GPU-a1,GPU-a1"}});
  BindPod("index-too-big", 2, {{"berth.io/gpu-ids", "1,4"}});
  BindPod("empty-id", 2, {{"berth.io/gpu-ids", "GPU-a1,"}});
  BindPod("too-many", 2, {{"berth.io/gpu-ids", "GPU-a0,GPU-a1,GPU-a2,GPU-a3,GPU-a3"}});
  BindPod("bad-placement", 1, {{"berth.io/gpu-ids", "GPU-a3"}, {"berth.io/placement", "{oops"}});
  EXPECT_EQ(VisibleDevices({"GPU-a0", "GPU-a2"}), "GPU-a0,GPU-a2");
  // Unreadable placement: the pod still gets its GPU, without share limits.
  v1beta1::ContainerAllocateResponse answer;
  ASSERT_TRUE(Allocate({"GPU-a0"}, &answer).ok());
  EXPECT_EQ(Env(answer, "NVIDIA_VISIBLE_DEVICES"), "GPU-a3");
  EXPECT_EQ(answer.envs().size(), 1u);
}

TEST_F(DevicePluginTest, BadRequestsAreRefusedWithTheReason) {
  v1beta1::ContainerAllocateResponse answer;
  grpc::Status status = Allocate({"GPU-a0", "GPU-nope"}, &answer);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("GPU-nope"), std::string::npos);
  status = Allocate({"GPU-a0", "GPU-a1", "GPU-a2", "GPU-a3", "GPU-a0"}, &answer);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  status = Allocate({}, &answer);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  v1beta1::AllocateRequest many;
  for (int i = 0; i < 10000; ++i) many.add_container_requests()->add_devices_ids("GPU-a0");
  v1beta1::AllocateResponse response;
  grpc::ClientContext context;
  EXPECT_EQ(stub_->Allocate(&context, many, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  v1beta1::PreferredAllocationRequest preferred;
  auto* container = preferred.add_container_requests();
  container->add_available_deviceids("GPU-a0");
  container->set_allocation_size(3);
  v1beta1::PreferredAllocationResponse preferred_response;
  grpc::ClientContext preferred_context;
  EXPECT_EQ(stub_->GetPreferredAllocation(&preferred_context, preferred, &preferred_response)
                .error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(DevicePluginTest, PreferredAllocationIsBerthsWhenKubeletHasThem) {
  BindPod("train", 2, {{"berth.io/gpu-ids", "GPU-a3,GPU-a1"}});
  EXPECT_EQ(Preferred(kUuids, 2), "GPU-a3 GPU-a1 ");
  EXPECT_EQ(Preferred({"GPU-a0", "GPU-a1", "GPU-a2"}, 2), "GPU-a0 GPU-a1 ");  // GPU-a3 is taken

  // kubelet's must-include devices come first and the answer stays at the size asked, even
  // when kubelet names more than that.
  EXPECT_EQ(Preferred(kUuids, 2, {"GPU-a2", "GPU-a0", "GPU-a1"}), "GPU-a2 GPU-a0 ");
}

TEST(DevicePluginStart, FailsWithTheReasonWhenKubeletIsNotThere) {
  char dir_template[] = "/tmp/berth-dp-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  testing::ApiServerStandIn api;
  KubeConfig config;
  config.server = api.Start();
  api.Create("nodes", GpuNode(kNode, 1));
  KubeClient kube(config);
  DevicePluginOptions options;
  options.node = kNode;
  options.plugin_dir = dir_template;
  options.gpu_uuids = {"GPU-a0"};
  DevicePlugin plugin(options, kube);
  EXPECT_NE(plugin.Start().find("registering with kubelet"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(std::string(dir_template) + "/berth.sock"));

  options.gpu_uuids = {"GPU-a0", "GPU-a0"};
  EXPECT_NE(DevicePlugin(options, kube).Start().find("distinct"), std::string::npos);
  options.gpu_uuids = {"GPU-a0"};
  options.share_seats = 0;
  EXPECT_NE(DevicePlugin(options, kube).Start().find("--share-seats"), std::string::npos);
  options.share_seats = 4;
  options.share_resource = "nvidia.com/gpu";
  EXPECT_NE(DevicePlugin(options, kube).Start().find("--share-resource"), std::string::npos);
  options.share_resource = kGpuShareResource;
  options.gpu_uuids = {"GPU-" + std::string(58, 'f')};  // 62: no room for a seat's "::N"
  EXPECT_NE(DevicePlugin(options, kube).Start().find("distinct UUIDs of 1 to 60"),
            std::string::npos);
  options.share_seats = 1000;  // "::999"
  options.gpu_uuids = {"GPU-" + std::string(55, 'f')};
  EXPECT_NE(DevicePlugin(options, kube).Start().find("distinct UUIDs of 1 to 58"),
            std::string::npos);
  options.gpu_uuids.clear();
  for (int g = 0; g < 17; ++g) options.gpu_uuids.push_back("GPU-" + std::to_string(g));
  EXPECT_NE(DevicePlugin(options, kube).Start().find("at most 16384 seats"), std::string::npos);
  options.share_seats = 4;
  options.gpu_uuids = {"GPU-a0"};
  options.node = "bad/name";
  EXPECT_NE(DevicePlugin(options, kube).Start().find("node name"), std::string::npos);
  std::filesystem::remove_all(dir_template);
}

}  // namespace
}  // namespace berth
