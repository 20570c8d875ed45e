// C++ std::condition_variable::wait_for (libstdc++ uses pthread_cond_clockwait on a steady
// clock): W waits of 10 ms that time out, with the std::mutex held around them. argv: W
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
int main(int argc, char **argv) {
    int w = argc > 1 ? std::atoi(argv[1]) : 5;
    std::mutex mx;
    std::condition_variable cv;
    int timeouts = 0;
    {
        std::unique_lock<std::mutex> lk(mx);
        for (int i = 0; i < w; i++)
            if (cv.wait_for(lk, std::chrono::milliseconds(10)) == std::cv_status::timeout) timeouts++;
    }
    std::printf("mutex %p cond %p timeouts %d\n", (void *)mx.native_handle(), (void *)cv.native_handle(), timeouts);
    return 0;
}
