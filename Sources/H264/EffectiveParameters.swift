import COpenH264

extension H264Encoder {
    /// What an OpenH264 encoder was set up with, as it reports it after initialisation (see
    /// `H264Encoder.effectiveParameters()`). `description` prints the fields as `key=value` pairs in a fixed
    /// order, the same text the comparison benchmark's C loop prints, so two encoders' settings can be compared
    /// line for line.
    public struct EffectiveParameters: Sendable, Equatable, CustomStringConvertible {
        /// `iUsageType`: 0 camera (real time), 1 screen content, 2 camera (not real time), 3 screen (not real time).
        public var usage: Int
        /// `iPicWidth`: the picture width in pixels.
        public var width: Int
        /// `iPicHeight`: the picture height in pixels.
        public var height: Int
        /// `fMaxFrameRate`: frames per second.
        public var maxFrameRate: Double
        /// `iTargetBitrate`: bits per second.
        public var targetBitrate: Int
        /// `iMaxBitrate`: the rate-control cap, bits per second.
        public var maxBitrate: Int
        /// The first spatial layer's target and cap (OpenH264 keeps them apart from the overall ones).
        public var layerBitrate: Int
        /// The first spatial layer's cap (`iMaxSpatialBitrate`), bits per second.
        public var layerMaxBitrate: Int
        /// `iRCMode`: -1 off, 0 quality, 1 bitrate, 2 buffer, 3 timestamp, 4 bitrate with post-skip.
        public var rateControl: Int
        /// `iComplexityMode`: 0 low, 1 medium, 2 high.
        public var complexity: Int
        /// `iMultipleThreadIdc`: encoding threads (0: OpenH264 picks).
        public var threads: Int
        /// `uiSliceMode`: 0 single, 1 fixed count, 2 raster, 3 size-limited.
        public var sliceMode: Int
        /// `uiSliceNum`: slices per picture in fixed-count mode.
        public var sliceCount: Int
        /// `uiMaxNalSize`: the largest NAL unit in bytes in size-limited mode (0: no limit).
        public var maxNALSize: Int
        /// `uiIntraPeriod`: frames between IDRs (0: only the first).
        public var intraPeriod: Int
        /// `iNumRefFrame`: reference frames kept.
        public var referenceFrames: Int
        /// 0 CAVLC, 1 CABAC.
        public var entropyCoding: Int
        /// `bEnableFrameSkip`: rate control may skip frames.
        public var frameSkip: Bool
        /// `bEnableDenoise`: the pre-processing denoiser.
        public var denoise: Bool
        /// `bEnableBackgroundDetection`: cheaper coding of static background.
        public var backgroundDetection: Bool
        /// `bEnableAdaptiveQuant`: per-macroblock quantiser adaptation.
        public var adaptiveQuantization: Bool
        /// `bEnableSceneChangeDetect`: an IDR at a scene change.
        public var sceneChangeDetection: Bool
        /// `bEnableLongTermReference`: long-term reference frames.
        public var longTermReference: Bool
        /// `iSpatialLayerNum`: spatial (SVC) layers.
        public var spatialLayers: Int
        /// `iTemporalLayerNum`: temporal layers.
        public var temporalLayers: Int
        /// `iLoopFilterDisableIdc`: 0 on, 1 off, 2 on except across slice boundaries.
        public var deblocking: Int
        /// `iMinQp`: the lowest quantiser rate control may use.
        public var minQP: Int
        /// `iMaxQp`: the highest quantiser rate control may use.
        public var maxQP: Int
        /// `uiProfileIdc` of the first spatial layer (66: baseline).
        public var profile: Int

        init(_ p: SEncParamExt) {
            usage = Int(p.iUsageType.rawValue)
            width = Int(p.iPicWidth)
            height = Int(p.iPicHeight)
            maxFrameRate = Double(p.fMaxFrameRate)
            targetBitrate = Int(p.iTargetBitrate)
            maxBitrate = Int(p.iMaxBitrate)
            layerBitrate = Int(p.sSpatialLayers.0.iSpatialBitrate)
            layerMaxBitrate = Int(p.sSpatialLayers.0.iMaxSpatialBitrate)
            rateControl = Int(p.iRCMode.rawValue)
            complexity = Int(p.iComplexityMode.rawValue)
            threads = Int(p.iMultipleThreadIdc)
            sliceMode = Int(p.sSpatialLayers.0.sSliceArgument.uiSliceMode.rawValue)
            sliceCount = Int(p.sSpatialLayers.0.sSliceArgument.uiSliceNum)
            maxNALSize = Int(p.uiMaxNalSize)
            intraPeriod = Int(p.uiIntraPeriod)
            referenceFrames = Int(p.iNumRefFrame)
            entropyCoding = Int(p.iEntropyCodingModeFlag)
            frameSkip = p.bEnableFrameSkip
            denoise = p.bEnableDenoise
            backgroundDetection = p.bEnableBackgroundDetection
            adaptiveQuantization = p.bEnableAdaptiveQuant
            sceneChangeDetection = p.bEnableSceneChangeDetect
            longTermReference = p.bEnableLongTermReference
            spatialLayers = Int(p.iSpatialLayerNum)
            temporalLayers = Int(p.iTemporalLayerNum)
            deblocking = Int(p.iLoopFilterDisableIdc)
            minQP = Int(p.iMinQp)
            maxQP = Int(p.iMaxQp)
            profile = Int(p.sSpatialLayers.0.uiProfileIdc.rawValue)
        }

        /// The fields as `key=value` pairs, in the order `description` prints them.
        public var fields: [(key: String, value: String)] {
            func name(_ v: Int, _ names: [Int: String]) -> String { names[v] ?? "\(v)" }
            func onOff(_ b: Bool) -> String { b ? "on" : "off" }
            // A whole frame rate prints without a fraction (30, not 30.0), any other as a Float (29.97), as C's %g does.
            let fps = maxFrameRate == maxFrameRate.rounded() && abs(maxFrameRate) < 1e9 ? "\(Int(maxFrameRate))" : "\(Float(maxFrameRate))"
            return [
                ("usage", name(usage, [0: "camera", 1: "screen", 2: "camera-offline", 3: "screen-offline"])),
                ("size", "\(width)x\(height)"),
                ("max-fps", fps),
                ("bitrate", "\(targetBitrate)"),
                ("max-bitrate", "\(maxBitrate)"),
                ("layer-bitrate", "\(layerBitrate)"),
                ("layer-max-bitrate", "\(layerMaxBitrate)"),
                ("rc", name(rateControl, [-1: "off", 0: "quality", 1: "bitrate", 2: "buffer", 3: "timestamp", 4: "bitrate-post-skip"])),
                ("complexity", name(complexity, [0: "low", 1: "medium", 2: "high"])),
                ("threads", "\(threads)"),
                ("slice-mode", name(sliceMode, [0: "single", 1: "fixed", 2: "raster", 3: "size-limited"])),
                ("slices", "\(sliceCount)"),
                ("max-nal-size", "\(maxNALSize)"),
                ("intra-period", "\(intraPeriod)"),
                ("ref-frames", "\(referenceFrames)"),
                ("entropy", name(entropyCoding, [0: "cavlc", 1: "cabac"])),
                ("frame-skip", onOff(frameSkip)),
                ("denoise", onOff(denoise)),
                ("background-detection", onOff(backgroundDetection)),
                ("adaptive-quant", onOff(adaptiveQuantization)),
                ("scene-change", onOff(sceneChangeDetection)),
                ("ltr", onOff(longTermReference)),
                ("spatial-layers", "\(spatialLayers)"),
                ("temporal-layers", "\(temporalLayers)"),
                ("deblocking", name(deblocking, [0: "on", 1: "off", 2: "not-slice-boundaries"])),
                ("qp", "\(minQP)-\(maxQP)"),
                ("profile", name(profile, [66: "baseline", 77: "main", 100: "high"])),
            ]
        }

        /// All fields as `key=value` pairs separated by spaces, in the order of `fields`.
        public var description: String { fields.map { "\($0.key)=\($0.value)" }.joined(separator: " ") }
    }
}
