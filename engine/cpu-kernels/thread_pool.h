// A small persistent pool for the quantized matmul: a decode step issues
// hundreds of short products, so spawning threads per call (or waking them
// through a condition variable every time) would cost more than the work.
// Workers spin briefly after a job, then sleep.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace afm::qmm {

class ThreadPool {
 public:
  using TaskFn = void (*)(void* ctx, int task);

  // `threads` counts the calling thread, so threads - 1 workers are started.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const {
    return static_cast<int>(workers_.size()) + 1;
  }

  // Runs fn(ctx, i) for i in [0, tasks) on the caller and the workers and
  // returns when all are done. A second caller arriving while a job runs
  // (another MLX stream) runs its tasks itself rather than queueing.
  void run(int tasks, TaskFn fn, void* ctx);

 private:
  void worker_loop();
  void drain();

  std::vector<std::thread> workers_;
  std::mutex submit_;

  // Even: a job is published (or none yet); odd: the job fields are being
  // rewritten and workers must not enter.
  std::atomic<uint64_t> gen_{0};
  std::atomic<int> busy_{0}; // workers inside drain()
  std::atomic<int> next_{0}; // next task index to hand out
  std::atomic<int> pending_{0}; // tasks not yet finished
  int tasks_ = 0;
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;

  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  int64_t spin_ns_;
};

// Physical cores available to this process (SMT siblings counted once).
int physical_cores();

// The process's one pool, shared by every kernel (the quantized matmul,
// attention): two pools would put 2x the cores' threads to spin against
// each other. Sized to num_threads(); shared so a resize never frees a pool
// a concurrent call is still using.
std::shared_ptr<ThreadPool> shared_pool();

// Threads per call, the caller included. Defaults to the physical core
// count (AFM_QMM_THREADS overrides); a new count applies from the next call
// (the old pool is freed once no call uses it).
int num_threads();
void set_num_threads(int n);

} // namespace afm::qmm
