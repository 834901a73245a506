remat-profile 2
measured 1
cpu AMD EPYC
threads 1
config 4 128 4 256 64 16 64 0 0 0
update 0.628824
cache 33554432
fwd ln1_stat 0.0806099996
fwdhot ln1_stat 0.0806099996
fwd ln1 0.0304660005
fwdhot ln1 0.0304660005
bwd ln1 0.133258
bwdhot ln1 0.133258
fwd qkv 1.595037
fwdhot qkv 1.595037
bwd qkv 3.295713
bwdhot qkv 3.295713
fwd att 4.784762
fwdhot att 4.784762
fwd atty 3.300031
fwdhot atty 3.300031
bwd atty 16.018036
bwdhot atty 16.018036
fwd res2 0.570816
fwdhot res2 0.570816
bwd res2 0.908817
bwdhot res2 0.908817
fwd ln2_stat 0.054091
fwdhot ln2_stat 0.054091
fwd ln2 0.0250359997
fwdhot ln2 0.0250359997
bwd ln2 0.115285001
bwdhot ln2 0.115285001
fwd fch 1.488178
fwdhot fch 1.488178
bwd fch 3.172814
bwdhot fch 3.172814
fwd fch_gelu 0.382534999
fwdhot fch_gelu 0.382534999
bwd fch_gelu 0.62702
bwdhot fch_gelu 0.62702
fwd res3 1.500832
fwdhot res3 1.500832
bwd res3 3.208029
bwdhot res3 3.208029
fwd emb 0.0188350007
fwdhot emb 0.0188350007
bwd emb 0.0716330009
bwdhot emb 0.0716330009
fwd lnf_stat 0.0536900004
fwdhot lnf_stat 0.0536900004
fwd lnf 0.0259989994
fwdhot lnf 0.0259989994
bwd lnf 0.116808
bwdhot lnf 0.116808
fwd logits 1.039822
fwdhot logits 1.039822
bwd logits 1.494149
bwdhot logits 1.494149
end
