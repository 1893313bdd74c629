// Classifies the test images of images.hpp (written by `embedded_tools
// images`) with the emitted model and prints, per image, its label, the
// class the model gives and the ten probabilities' bits (hexadecimal). The
// same source runs on the host and on the Cortex-M4 (startup.c), so the two
// outputs compare line by line (`embedded_tools compare`).
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "images.hpp"
#include "model_unit.hpp"

int main() {
    static float x[784], prob[10];
    for (int i = 0; i < image_count; ++i) {
        for (int k = 0; k < 784; ++k) x[k] = image_pixels[i][k] / 255.0f;  // as dlgraph::data's loader
        model_run(x, prob);
        int best = 0;
        for (int c = 1; c < 10; ++c)
            if (prob[c] > prob[best]) best = c;
        std::printf("%d %d %d", i, static_cast<int>(image_labels[i]), best);
        for (float p : prob) {
            std::uint32_t bits;
            std::memcpy(&bits, &p, 4);
            std::printf(" %08lx", static_cast<unsigned long>(bits));
        }
        std::printf("\n");
    }
    std::printf("done %d images, arena %lu bytes\n", image_count, static_cast<unsigned long>(model_arena_bytes()));
    return 0;
}
