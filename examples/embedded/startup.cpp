// A minimal start-up for QEMU's mps2-an386 (Cortex-M4) with newlib's
// semihosting (librdimon, --specs=rdimon.specs): vector table, .data copied,
// .bss zeroed, the FPU enabled, semihosting opened, main(), exit() with its
// status (QEMU exits with it). newlib's own rdimon-crt0 faults on this
// board, hence this file and -nostartfiles. A fault exits with status 70.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

extern "C" {
extern std::uint32_t _sidata[], _sdata[], _edata[], _sbss[], _ebss[], _estack[];
void initialise_monitor_handles();
void reset_handler();
}
int main();

// exit() runs the destructors' list through _fini, which -nostartfiles
// leaves out (crti.o); nothing needs it here.
extern "C" void _fini() {}

extern "C" void reset_handler() {
    for (std::uint32_t *s = _sidata, *d = _sdata; d < _edata;) *d++ = *s++;
    for (std::uint32_t* d = _sbss; d < _ebss;) *d++ = 0;
    *reinterpret_cast<volatile std::uint32_t*>(0xE000ED88u) |= 0xFu << 20;  // CPACR: the FPU (CP10, CP11)
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    initialise_monitor_handles();
    std::exit(main());
}

namespace {
void fault_handler() { _exit(70); }
using handler = void (*)();
}  // namespace

__attribute__((section(".isr_vector"), used)) const handler vectors[16] = {
    reinterpret_cast<handler>(_estack), reset_handler, fault_handler, fault_handler, fault_handler, fault_handler,
    fault_handler, nullptr, nullptr, nullptr, nullptr, fault_handler, fault_handler, nullptr, fault_handler,
    fault_handler,
};
