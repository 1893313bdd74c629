// A small SVG line chart writer for the examples' training curves: no
// dependency, one file a person can open in a browser.
#pragma once

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace svg_plot {

struct series {
    std::string title;
    std::string x_label;
    std::vector<std::pair<double, double>> points;
    std::string color = "#1f77b4";
};

// Charts side by side, each with axes, ticks and its title.
inline void write(const std::string& path, const std::vector<series>& charts) {
    const double w = 420, h = 300, m = 50;
    std::ofstream out(path);
    out << "<svg xmlns='http://www.w3.org/2000/svg' width='" << w * static_cast<double>(charts.size()) << "' height='" << h
        << "' font-family='sans-serif' font-size='11'>\n<rect width='100%' height='100%' fill='white'/>\n";
    char buf[64];
    for (std::size_t c = 0; c < charts.size(); ++c) {
        const auto& s = charts[c];
        const double ox = w * static_cast<double>(c);
        if (s.points.empty()) continue;
        double x0 = s.points.front().first, x1 = s.points.front().first, y0 = s.points.front().second, y1 = y0;
        for (auto& [x, y] : s.points) {
            x0 = std::min(x0, x); x1 = std::max(x1, x);
            y0 = std::min(y0, y); y1 = std::max(y1, y);
        }
        if (x1 == x0) x1 = x0 + 1;
        if (y1 == y0) y1 = y0 + 1;
        const double pad = (y1 - y0) * 0.05;
        y0 -= pad; y1 += pad;
        auto px = [&](double x) { return ox + m + (x - x0) / (x1 - x0) * (w - 1.5 * m); };
        auto py = [&](double y) { return h - m - (y - y0) / (y1 - y0) * (h - 1.8 * m); };
        out << "<text x='" << ox + w / 2 << "' y='20' text-anchor='middle' font-size='14'>" << s.title << "</text>\n";
        out << "<line x1='" << px(x0) << "' y1='" << py(y0) << "' x2='" << px(x1) << "' y2='" << py(y0) << "' stroke='black'/>\n";
        out << "<line x1='" << px(x0) << "' y1='" << py(y0) << "' x2='" << px(x0) << "' y2='" << py(y1) << "' stroke='black'/>\n";
        for (int t = 0; t <= 4; ++t) {
            const double yv = y0 + (y1 - y0) * t / 4, xv = x0 + (x1 - x0) * t / 4;
            std::snprintf(buf, sizeof buf, "%.3g", yv);
            out << "<text x='" << px(x0) - 5 << "' y='" << py(yv) + 4 << "' text-anchor='end'>" << buf << "</text>\n";
            out << "<line x1='" << px(x0) << "' y1='" << py(yv) << "' x2='" << px(x1) << "' y2='" << py(yv)
                << "' stroke='#ddd'/>\n";
            std::snprintf(buf, sizeof buf, "%.3g", xv);
            out << "<text x='" << px(xv) << "' y='" << py(y0) + 15 << "' text-anchor='middle'>" << buf << "</text>\n";
        }
        out << "<text x='" << px((x0 + x1) / 2) << "' y='" << h - 12 << "' text-anchor='middle'>" << s.x_label << "</text>\n";
        out << "<polyline fill='none' stroke='" << s.color << "' stroke-width='1.5' points='";
        for (auto& [x, y] : s.points) out << px(x) << "," << py(y) << " ";
        out << "'/>\n";
        for (auto& [x, y] : s.points)
            if (s.points.size() <= 40)
                out << "<circle cx='" << px(x) << "' cy='" << py(y) << "' r='3' fill='" << s.color << "'/>\n";
    }
    out << "</svg>\n";
}

}  // namespace svg_plot
