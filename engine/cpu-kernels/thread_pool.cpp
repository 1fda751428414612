#include "thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define AFM_CPU_RELAX() _mm_pause()
#else
#define AFM_CPU_RELAX() ((void)0)
#endif

namespace afm::qmm {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int read_int(const std::string& path) {
  std::ifstream f(path);
  int v = -1;
  if (f) f >> v;
  return v;
}

} // namespace

int physical_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    unsigned n = std::thread::hardware_concurrency();
    return n ? static_cast<int>(n) : 1;
  }
  // One entry per (package, core): SMT siblings share both ids.
  std::set<std::pair<int, int>> cores;
  int cpus = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    ++cpus;
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    int pkg = read_int(base + "physical_package_id");
    int core = read_int(base + "core_id");
    if (pkg < 0 || core < 0) return cpus > 0 ? CPU_COUNT(&set) : 1;
    cores.emplace(pkg, core);
  }
  return cores.empty() ? 1 : static_cast<int>(cores.size());
}

ThreadPool::ThreadPool(int threads) {
  // Waiting actively keeps a worker hot between the products of a decode
  // step, which MLX's other ops (norms, RoPE, elementwise) separate by more
  // than 50 µs at one stream: waking a sleeper for each of a step's ~120
  // products cost ~6 ms a token (one stream 38.0 tok/s with 50 µs, 44.3
  // with 5 ms). Past this it sleeps, so an idle engine costs nothing.
  const char* spin = std::getenv("AFM_QMM_SPIN_US");
  spin_ns_ = (spin ? std::atoll(spin) : 5000) * 1000;
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(sleep_mu_);
    stop_.store(true);
  }
  sleep_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::drain() {
  for (;;) {
    int i = next_.fetch_add(1);
    if (i >= tasks_) return;
    fn_(ctx_, i);
    pending_.fetch_sub(1);
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    // Wait for a newly published (even) generation: a short busy spin, then
    // yielding (a spinning worker must not delay a thread that just woke on
    // this core, such as the MLX caller waiting for its eval), then sleep.
    const int64_t start = now_ns();
    for (int spins = 0;; ++spins) {
      uint64_t g = gen_.load();
      if ((g != seen && (g & 1) == 0) || stop_.load()) break;
      if (spins < 1024) {
        AFM_CPU_RELAX();
        continue;
      }
      sched_yield();
      if (now_ns() - start > spin_ns_) {
        std::unique_lock<std::mutex> lk(sleep_mu_);
        sleepers_.fetch_add(1);
        sleep_cv_.wait(lk, [&] {
          uint64_t g2 = gen_.load();
          return stop_.load() || (g2 != seen && (g2 & 1) == 0);
        });
        sleepers_.fetch_sub(1);
        break;
      }
    }
    if (stop_.load()) return;
    // Announce ourselves before re-reading the generation: a submitter that
    // saw busy_ == 0 after marking the generation odd is then guaranteed to
    // make us read the odd (or the next published) value and back off.
    busy_.fetch_add(1);
    uint64_t g = gen_.load();
    if ((g & 1) == 0 && g != seen) {
      seen = g;
      drain();
    }
    busy_.fetch_sub(1);
  }
}

void ThreadPool::run(int tasks, TaskFn fn, void* ctx) {
  if (tasks <= 0) return;
  std::unique_lock<std::mutex> lk(submit_, std::try_to_lock);
  if (!lk.owns_lock() || workers_.empty() || tasks == 1) {
    for (int i = 0; i < tasks; ++i) fn(ctx, i);
    return;
  }
  // Close the door, wait for stragglers of the previous job, rewrite.
  gen_.fetch_add(1);
  while (busy_.load() != 0) AFM_CPU_RELAX();
  tasks_ = tasks;
  fn_ = fn;
  ctx_ = ctx;
  next_.store(0);
  pending_.store(tasks);
  gen_.fetch_add(1);
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> g(sleep_mu_);
    sleep_cv_.notify_all();
  }
  drain();
  while (pending_.load() != 0) AFM_CPU_RELAX();
}

namespace {

std::mutex g_pool_mu;
std::shared_ptr<ThreadPool> g_pool;
int g_threads = 0; // 0: not decided yet

int initial_threads() {
  if (const char* s = std::getenv("AFM_QMM_THREADS")) {
    int n = std::atoi(s);
    if (n > 0) return n;
  }
  return std::max(1, physical_cores());
}

} // namespace

std::shared_ptr<ThreadPool> shared_pool() {
  std::lock_guard<std::mutex> lk(g_pool_mu);
  if (g_threads == 0) g_threads = initial_threads();
  if (!g_pool || g_pool->size() != g_threads) g_pool = std::make_shared<ThreadPool>(g_threads);
  return g_pool;
}

int num_threads() {
  std::lock_guard<std::mutex> lk(g_pool_mu);
  if (g_threads == 0) g_threads = initial_threads();
  return g_threads;
}

void set_num_threads(int n) {
  std::lock_guard<std::mutex> lk(g_pool_mu);
  g_threads = std::max(1, n);
}

} // namespace afm::qmm
