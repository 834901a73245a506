remat-profile 1
measured 1
cpu AMD EPYC
threads 1
config 4 128 4 256 64 16 64 0 0 0
update 0.628824
fwd ln1_stat 0.0806099996
fwd ln1 0.0304660005
bwd ln1 0.133258
fwd qkv 1.595037
bwd qkv 3.295713
fwd att 4.784762
fwd atty 3.300031
bwd atty 16.018036
fwd res2 0.570816
bwd res2 0.908817
fwd ln2_stat 0.054091
fwd ln2 0.0250359997
bwd ln2 0.115285001
fwd fch 1.488178
bwd fch 3.172814
fwd fch_gelu 0.382534999
bwd fch_gelu 0.62702
fwd res3 1.500832
bwd res3 3.208029
fwd emb 0.0188350007
bwd emb 0.0716330009
fwd lnf_stat 0.0536900004
fwd lnf 0.0259989994
bwd lnf 0.116808
fwd logits 1.039822
bwd logits 1.494149
end
